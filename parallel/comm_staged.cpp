// StagedComm: host copies around the wrapped communicator's operations.
#include "parallel/comm_staged.hpp"

#include <utility>
#include <vector>

namespace gridlm::parallel {
namespace {

// One operation in flight: its host buffer (alive until the wrapped transfer completes) and
// where the result goes once it has. It keeps its own copy of the copy functions: a request
// left pending by an error may complete in its destructor after the communicator is gone.
class StagedRequest final : public Request::Impl {
public:
  StagedRequest(std::vector<std::byte> host, const StagingCopies& copies, void* out = nullptr,
                std::size_t out_offset = 0, std::size_t out_bytes = 0)
      : host_(std::move(host)), copies_(copies), out_(out), out_offset_(out_offset),
        out_bytes_(out_bytes) {}
  std::byte* host() { return host_.data(); }
  void set_inner(Request inner) { inner_ = std::move(inner); }
  void wait() override {
    inner_.wait();
    finish();
  }
  bool test() override {
    if (!done_ && inner_.test()) finish();
    return done_;
  }

private:
  void finish() {
    if (done_) return;
    done_ = true;
    if (out_ != nullptr) copies_.to_device(out_, host_.data() + out_offset_, out_bytes_);
  }

  std::vector<std::byte> host_;
  StagingCopies copies_;
  void* out_;
  std::size_t out_offset_, out_bytes_;
  Request inner_;
  bool done_ = false;
};

} // namespace

StagedComm::StagedComm(std::unique_ptr<Comm> inner, StagingCopies copies)
    : Comm(inner->rank(), inner->size()), inner_(std::move(inner)), copies_(std::move(copies)),
      name_(std::string(inner_->backend()) + "-staged") {}

// The all-reduce runs in place on one host buffer: the input copied in, the result copied out.
Request StagedComm::start_all_reduce(const void* in, void* out, std::size_t count, DType type,
                                     ReduceOp op, Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  auto r = std::make_unique<StagedRequest>(std::vector<std::byte>(bytes), copies_, out, 0, bytes);
  copies_.to_host(r->host(), in, bytes);
  r->set_inner(inner_->start_all_reduce(r->host(), r->host(), count, type, op, mode));
  return Request(std::move(r));
}

// Host buffer: the size() input blocks, then the output block.
Request StagedComm::start_reduce_scatter(const void* in, void* out, std::size_t count_per_rank,
                                         DType type, ReduceOp op, Mode mode) {
  const std::size_t block = count_per_rank * dtype_size(type), all = block * std::size_t(size());
  auto r = std::make_unique<StagedRequest>(std::vector<std::byte>(all + block), copies_, out, all,
                                           block);
  copies_.to_host(r->host(), in, all);
  r->set_inner(
      inner_->start_reduce_scatter(r->host(), r->host() + all, count_per_rank, type, op, mode));
  return Request(std::move(r));
}

// Host buffer: this rank's input block, then the size() output blocks.
Request StagedComm::start_all_gather(const void* in, void* out, std::size_t count_per_rank,
                                     DType type, Mode mode) {
  const std::size_t block = count_per_rank * dtype_size(type), all = block * std::size_t(size());
  auto r = std::make_unique<StagedRequest>(std::vector<std::byte>(block + all), copies_, out, block,
                                           all);
  copies_.to_host(r->host(), in, block);
  r->set_inner(inner_->start_all_gather(r->host(), r->host() + block, count_per_rank, type, mode));
  return Request(std::move(r));
}

// Only the root's data goes to the host first, and only the others' comes back.
Request StagedComm::start_broadcast(void* data, std::size_t count, DType type, int root,
                                    Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  const bool is_root = rank() == root;
  auto r = std::make_unique<StagedRequest>(std::vector<std::byte>(bytes), copies_,
                                           is_root ? nullptr : data, 0, bytes);
  if (is_root) copies_.to_host(r->host(), data, bytes);
  r->set_inner(inner_->start_broadcast(r->host(), count, type, root, mode));
  return Request(std::move(r));
}

Request StagedComm::start_send(const void* data, std::size_t count, DType type, int peer, int tag,
                               Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  auto r = std::make_unique<StagedRequest>(std::vector<std::byte>(bytes), copies_);
  copies_.to_host(r->host(), data, bytes);
  r->set_inner(inner_->start_send(r->host(), count, type, peer, tag, mode));
  return Request(std::move(r));
}

Request StagedComm::start_recv(void* data, std::size_t count, DType type, int peer, int tag,
                               Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  auto r = std::make_unique<StagedRequest>(std::vector<std::byte>(bytes), copies_, data, 0, bytes);
  r->set_inner(inner_->start_recv(r->host(), count, type, peer, tag, mode));
  return Request(std::move(r));
}

} // namespace gridlm::parallel
