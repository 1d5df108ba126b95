// parallel::Comm: typed collectives and point-to-point transfers among the ranks of one grid
// axis, behind one interface with two backends: MPI (CPU buffers) and NCCL (GPU buffers).
// Buffers are Spans, so element type and count travel together; sizes that cannot match
// (all-gather output not size() times the input, say) are refused before any rank sends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "parallel/dtype.hpp"
#include "parallel/span.hpp"

namespace gridlm::parallel {

enum class ReduceOp { sum, max, min };

// A transfer in flight. wait() completes it; the destructor waits too, so a buffer can never
// be released while the network still uses it. Except while an exception unwinds past it: then
// the peer may never come (it waits for what this rank will not send now), so the request is
// abandoned instead, and the error reaches main, which ends the job (abandoned_transfers()).
class Request {
public:
  class Impl {
  public:
    virtual ~Impl() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
    // Called instead of wait() when the request is abandoned (see the class comment): a backend
    // withdraws what it can, so that nothing arrives in a buffer that is being released.
    virtual void abandon() {}
  };

  Request() = default;
  explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  void wait();
  // True once complete (then wait() returns at once).
  bool test();
  // The flight recorder's handle of the operation (flight_recorder.hpp), completed with it.
  void attach_record(std::uint64_t seq) { record_ = seq; }

private:
  void complete_record();

  std::unique_ptr<Impl> impl_;
  std::uint64_t record_ = 0;
  // Exceptions unwinding when this object was made: more at its destruction means one is
  // passing through, not that it is being destroyed inside a handler or a destructor.
  int unwinding_ = std::uncaught_exceptions();
};

// How many transfers an error left in flight (Request's destructor) in this process: MPI must
// not be finalised then, since its requests still name them.
std::size_t abandoned_transfers();

class Comm;

// Scope of a group of transfers: begin_group() now, end_group() at the end of the scope. An
// error of end_group() is thrown, except while an error is already unwinding the scope (a
// failed operation inside the group, which NCCL's end of the group reports again): a second
// exception then would end the process without the first one's message.
class Group {
public:
  explicit Group(Comm& comm);
  ~Group() noexcept(false);
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

private:
  Comm& comm_;
  int unwinding_ = 0; // std::uncaught_exceptions() when the group began
};

class Comm {
public:
  virtual ~Comm() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual const char* backend() const = 0;
  // How the flight recorder names this communicator: its grid axis ("dp", "pp", "tp",
  // "world"; a literal) and the world rank of each of its ranks.
  void set_identity(const char* axis, std::vector<int> world_ranks);

  // Transfers posted between begin_group() and end_group() progress together. NCCL needs this
  // for two ranks that send to each other (each send would otherwise wait for a receive queued
  // behind it on the peer); MPI does not, and ignores it. Prefer the RAII Group below.
  virtual void begin_group() {}
  virtual void end_group() {}

  // --- blocking forms -------------------------------------------------------------------
  // They call the backend's blocking operation where it has one (MPI's blocking collectives
  // use faster algorithms than the non-blocking ones).
  template <class T>
  void all_reduce(Span<T> data, ReduceOp op = ReduceOp::sum) {
    post_all_reduce<T>(data, data, op, Mode::blocking).wait();
  }
  template <class T>
  void all_reduce(Span<const T> in, Span<T> out, ReduceOp op = ReduceOp::sum) {
    post_all_reduce<T>(in, out, op, Mode::blocking).wait();
  }
  // in: [size() * out.size()]; rank r receives the reduction of block r.
  template <class T>
  void reduce_scatter(Span<const T> in, Span<T> out, ReduceOp op = ReduceOp::sum) {
    post_reduce_scatter<T>(in, out, op, Mode::blocking).wait();
  }
  // out: [size() * in.size()]; block r holds rank r's input.
  template <class T>
  void all_gather(Span<const T> in, Span<T> out) {
    post_all_gather<T>(in, out, Mode::blocking).wait();
  }
  template <class T>
  void broadcast(Span<T> data, int root) {
    post_broadcast<T>(data, root, Mode::blocking).wait();
  }
  template <class T>
  void send(Span<const T> data, int peer, int tag = 0) {
    post_send<T>(data, peer, tag, Mode::blocking).wait();
  }
  template <class T>
  void recv(Span<T> data, int peer, int tag = 0) {
    post_recv<T>(data, peer, tag, Mode::blocking).wait();
  }

  // --- non-blocking forms: the transfer runs until the Request is waited on ----------------
  template <class T>
  Request iall_reduce(Span<T> data, ReduceOp op = ReduceOp::sum) {
    return post_all_reduce<T>(data, data, op, Mode::nonblocking);
  }
  template <class T>
  Request iall_reduce(Span<const T> in, Span<T> out, ReduceOp op = ReduceOp::sum) {
    return post_all_reduce<T>(in, out, op, Mode::nonblocking);
  }
  template <class T>
  Request ireduce_scatter(Span<const T> in, Span<T> out, ReduceOp op = ReduceOp::sum) {
    return post_reduce_scatter<T>(in, out, op, Mode::nonblocking);
  }
  template <class T>
  Request iall_gather(Span<const T> in, Span<T> out) {
    return post_all_gather<T>(in, out, Mode::nonblocking);
  }
  template <class T>
  Request ibroadcast(Span<T> data, int root) {
    return post_broadcast<T>(data, root, Mode::nonblocking);
  }
  template <class T>
  Request isend(Span<const T> data, int peer, int tag = 0) {
    return post_send<T>(data, peer, tag, Mode::nonblocking);
  }
  template <class T>
  Request irecv(Span<T> data, int peer, int tag = 0) {
    return post_recv<T>(data, peer, tag, Mode::nonblocking);
  }

protected:
  Comm(int rank, int size) : rank_(rank), size_(size) {}
  // It forwards each operation to the communicator it wraps.
  friend class StagedComm;

  // blocking: the backend may complete the operation before returning (and return an empty
  // Request); nonblocking: it must return at once.
  enum class Mode { blocking, nonblocking };

  // Backends implement these on untyped buffers; the typed templates are the only callers.
  // For in-place operations in == out.
  virtual Request start_all_reduce(const void* in, void* out, std::size_t count, DType type,
                                   ReduceOp op, Mode mode) = 0;
  virtual Request start_reduce_scatter(const void* in, void* out, std::size_t count_per_rank,
                                       DType type, ReduceOp op, Mode mode) = 0;
  virtual Request start_all_gather(const void* in, void* out, std::size_t count_per_rank,
                                   DType type, Mode mode) = 0;
  virtual Request start_broadcast(void* data, std::size_t count, DType type, int root,
                                  Mode mode) = 0;
  virtual Request start_send(const void* data, std::size_t count, DType type, int peer, int tag,
                             Mode mode) = 0;
  virtual Request start_recv(void* data, std::size_t count, DType type, int peer, int tag,
                             Mode mode) = 0;

private:
  template <class T>
  Request post_all_reduce(Span<const T> in, Span<T> out, ReduceOp op, Mode mode) {
    check_sizes("all_reduce", in.size(), out.size(), 1);
    const auto seq = record("all_reduce", -1, out.size_bytes(), -1, mode);
    return attach(seq,
                  start_all_reduce(in.data(), out.data(), out.size(), DTypeOf<T>::value, op, mode));
  }
  template <class T>
  Request post_reduce_scatter(Span<const T> in, Span<T> out, ReduceOp op, Mode mode) {
    check_sizes("reduce_scatter", in.size(), out.size(), size_);
    const auto seq = record("reduce_scatter", -1, in.size_bytes(), -1, mode);
    return attach(
        seq, start_reduce_scatter(in.data(), out.data(), out.size(), DTypeOf<T>::value, op, mode));
  }
  template <class T>
  Request post_all_gather(Span<const T> in, Span<T> out, Mode mode) {
    check_sizes("all_gather", out.size(), in.size(), size_);
    const auto seq = record("all_gather", -1, out.size_bytes(), -1, mode);
    return attach(seq, start_all_gather(in.data(), out.data(), in.size(), DTypeOf<T>::value, mode));
  }
  template <class T>
  Request post_broadcast(Span<T> data, int root, Mode mode) {
    check_peer("broadcast root", root);
    const auto seq = record("broadcast", root, data.size_bytes(), -1, mode);
    return attach(seq, start_broadcast(data.data(), data.size(), DTypeOf<T>::value, root, mode));
  }
  template <class T>
  Request post_send(Span<const T> data, int peer, int tag, Mode mode) {
    check_peer("send destination", peer);
    if (skip_send_for_fault(peer, data.size_bytes(), tag)) return Request();
    const auto seq = record("send", peer, data.size_bytes(), tag, mode);
    return attach(seq, start_send(data.data(), data.size(), DTypeOf<T>::value, peer, tag, mode));
  }
  template <class T>
  Request post_recv(Span<T> data, int peer, int tag, Mode mode) {
    check_peer("recv source", peer);
    const auto seq = record("recv", peer, data.size_bytes(), tag, mode);
    return attach(seq, start_recv(data.data(), data.size(), DTypeOf<T>::value, peer, tag, mode));
  }

  // Throws unless big == factor * small.
  void check_sizes(const char* op, std::size_t big, std::size_t small, int factor) const;
  void check_peer(const char* what, int peer) const;
  // The flight recorder's entry for an operation about to start (peer: this communicator's
  // rank, -1 for none); a blocking one counts as waited on from now.
  std::uint64_t record(const char* op, int peer, std::size_t bytes, int tag, Mode mode) const;
  static Request attach(std::uint64_t seq, Request r) {
    r.attach_record(seq);
    return r;
  }
  // Fault injection (fault_injection.hpp): true when this send is to be dropped; records it.
  bool skip_send_for_fault(int peer, std::size_t bytes, int tag) const;

  int rank_ = 0;
  int size_ = 1;
  const char* axis_ = "comm";
  std::shared_ptr<const std::vector<int>> members_;
};

} // namespace gridlm::parallel
