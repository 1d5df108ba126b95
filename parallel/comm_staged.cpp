// StagedComm: host copies around the wrapped communicator's operations.
#include "parallel/comm_staged.hpp"

#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <utility>

namespace gridlm::parallel {

// Free host buffers by size. Taking gives the smallest free one that fits, or a new one of the
// size asked; giving back keeps it for the next operation.
class StagingPool {
public:
  explicit StagingPool(const StagingCopies& copies)
      : allocate_(copies.allocate), release_(copies.release) {}
  ~StagingPool() {
    for (const auto& [capacity, data] : free_)
      release(data, capacity);
  }
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  std::pair<std::byte*, std::size_t> take(std::size_t bytes) {
    if (bytes == 0) return {nullptr, 0};
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (const auto it = free_.lower_bound(bytes); it != free_.end()) {
        const std::pair<std::byte*, std::size_t> buffer{it->second, it->first};
        free_.erase(it);
        return buffer;
      }
      ++allocated_;
    }
    void* data = allocate_ ? allocate_(bytes) : ::operator new(bytes);
    return {static_cast<std::byte*>(data), bytes};
  }

  void give(std::byte* data, std::size_t capacity) {
    if (data == nullptr) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    free_.emplace(capacity, data);
  }

  std::size_t allocated() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return allocated_;
  }

private:
  void release(std::byte* data, std::size_t capacity) const {
    if (release_) {
      release_(data, capacity);
    } else {
      ::operator delete(data);
    }
  }

  std::function<void*(std::size_t)> allocate_;
  std::function<void(void*, std::size_t)> release_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, std::byte*> free_;
  std::size_t allocated_ = 0;
};

namespace {

// A host buffer taken from the pool, given back when dropped.
class HostBuffer {
public:
  HostBuffer(std::shared_ptr<StagingPool> pool, std::size_t bytes) : pool_(std::move(pool)) {
    std::tie(data_, capacity_) = pool_->take(bytes);
  }
  ~HostBuffer() { pool_->give(data_, capacity_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  std::byte* data() const { return data_; }
  // Never given back nor freed: the network may still write into it (an abandoned transfer).
  void leak() { data_ = nullptr; }

private:
  std::shared_ptr<StagingPool> pool_;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// One operation in flight: its host buffer (alive until the wrapped transfer completes: declared
// before it, so destroyed after it) and where the result goes once it has. It keeps its own copy
// of the copy back and a share of the pool: a request left pending by an error may complete in
// its destructor after the communicator is gone.
class StagedRequest final : public Request::Impl {
public:
  StagedRequest(std::shared_ptr<StagingPool> pool, std::size_t bytes, const StagingCopies& copies,
                void* out = nullptr, std::size_t out_offset = 0, std::size_t out_bytes = 0)
      : host_(std::move(pool), bytes), to_device_(out != nullptr ? copies.to_device : nullptr),
        out_(out), out_offset_(out_offset), out_bytes_(out_bytes) {}
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
  // The wrapped transfer, abandoned with this one, may still use the host buffer until the job
  // ends: it stays allocated.
  void abandon() override {
    if (!done_) host_.leak();
  }

private:
  void finish() {
    if (done_) return;
    done_ = true;
    if (out_ != nullptr) to_device_(out_, host_.data() + out_offset_, out_bytes_);
  }

  HostBuffer host_;
  std::function<void(void*, const void*, std::size_t)> to_device_;
  void* out_;
  std::size_t out_offset_, out_bytes_;
  Request inner_;
  bool done_ = false;
};

} // namespace

StagedComm::StagedComm(std::unique_ptr<Comm> inner, StagingCopies copies)
    : Comm(inner->rank(), inner->size()), inner_(std::move(inner)), copies_(std::move(copies)),
      name_(std::string(inner_->backend()) + "-staged"),
      pool_(std::make_shared<StagingPool>(copies_)) {}

StagedComm::~StagedComm() = default;

std::size_t StagedComm::host_buffers_allocated() const { return pool_->allocated(); }

// The all-reduce runs in place on one host buffer: the input copied in, the result copied out.
Request StagedComm::start_all_reduce(const void* in, void* out, std::size_t count, DType type,
                                     ReduceOp op, Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  auto r = std::make_unique<StagedRequest>(pool_, bytes, copies_, out, 0, bytes);
  copies_.to_host(r->host(), in, bytes);
  r->set_inner(inner_->start_all_reduce(r->host(), r->host(), count, type, op, mode));
  return Request(std::move(r));
}

// Host buffer: the size() input blocks, then the output block.
Request StagedComm::start_reduce_scatter(const void* in, void* out, std::size_t count_per_rank,
                                         DType type, ReduceOp op, Mode mode) {
  const std::size_t block = count_per_rank * dtype_size(type), all = block * std::size_t(size());
  auto r = std::make_unique<StagedRequest>(pool_, all + block, copies_, out, all, block);
  copies_.to_host(r->host(), in, all);
  r->set_inner(
      inner_->start_reduce_scatter(r->host(), r->host() + all, count_per_rank, type, op, mode));
  return Request(std::move(r));
}

// Host buffer: this rank's input block, then the size() output blocks.
Request StagedComm::start_all_gather(const void* in, void* out, std::size_t count_per_rank,
                                     DType type, Mode mode) {
  const std::size_t block = count_per_rank * dtype_size(type), all = block * std::size_t(size());
  auto r = std::make_unique<StagedRequest>(pool_, block + all, copies_, out, block, all);
  copies_.to_host(r->host(), in, block);
  r->set_inner(inner_->start_all_gather(r->host(), r->host() + block, count_per_rank, type, mode));
  return Request(std::move(r));
}

// Only the root's data goes to the host first, and only the others' comes back.
Request StagedComm::start_broadcast(void* data, std::size_t count, DType type, int root,
                                    Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  const bool is_root = rank() == root;
  auto r =
      std::make_unique<StagedRequest>(pool_, bytes, copies_, is_root ? nullptr : data, 0, bytes);
  if (is_root) copies_.to_host(r->host(), data, bytes);
  r->set_inner(inner_->start_broadcast(r->host(), count, type, root, mode));
  return Request(std::move(r));
}

Request StagedComm::start_send(const void* data, std::size_t count, DType type, int peer, int tag,
                               Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  auto r = std::make_unique<StagedRequest>(pool_, bytes, copies_);
  copies_.to_host(r->host(), data, bytes);
  r->set_inner(inner_->start_send(r->host(), count, type, peer, tag, mode));
  return Request(std::move(r));
}

Request StagedComm::start_recv(void* data, std::size_t count, DType type, int peer, int tag,
                               Mode mode) {
  const std::size_t bytes = count * dtype_size(type);
  auto r = std::make_unique<StagedRequest>(pool_, bytes, copies_, data, 0, bytes);
  r->set_inner(inner_->start_recv(r->host(), count, type, peer, tag, mode));
  return Request(std::move(r));
}

} // namespace gridlm::parallel
