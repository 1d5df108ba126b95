// parallel::StagedComm: a communicator for device buffers over an MPI that cannot read device
// memory. Each operation copies its input into a host buffer (kept and reused: see
// host_buffers_allocated), runs the wrapped communicator's
// operation there and copies the result back into the caller's buffer when it completes (at
// once for blocking forms, in wait() or the first successful test() for non-blocking ones).
// The copies are the caller's (Kokkos lives above this library); on a host-memory build they
// are plain copies, which is how the path is tested without a GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "parallel/comm.hpp"

namespace gridlm::parallel {

// Byte copies between the caller's (device) memory and host memory, and the host memory itself.
struct StagingCopies {
  std::function<void(void* host, const void* device, std::size_t bytes)> to_host;
  std::function<void(void* device, const void* host, std::size_t bytes)> to_device;
  // Host buffers (pinned memory on a GPU: copies from pageable memory run at a fraction of the
  // bus's speed); unset: operator new and delete.
  std::function<void*(std::size_t bytes)> allocate = nullptr;
  std::function<void(void* host, std::size_t bytes)> release = nullptr;
};

class StagingPool;

class StagedComm final : public Comm {
public:
  StagedComm(std::unique_ptr<Comm> inner, StagingCopies copies);
  ~StagedComm() override;
  // The wrapped backend's name with "-staged": "mpi-staged".
  const char* backend() const override { return name_.c_str(); }
  // Host buffers allocated so far: an operation reuses the smallest free one that fits, so a
  // training step's transfers allocate only on the first step.
  std::size_t host_buffers_allocated() const;

protected:
  Request start_all_reduce(const void* in, void* out, std::size_t count, DType type, ReduceOp op,
                           Mode mode) override;
  Request start_reduce_scatter(const void* in, void* out, std::size_t count_per_rank, DType type,
                               ReduceOp op, Mode mode) override;
  Request start_all_gather(const void* in, void* out, std::size_t count_per_rank, DType type,
                           Mode mode) override;
  Request start_broadcast(void* data, std::size_t count, DType type, int root, Mode mode) override;
  Request start_send(const void* data, std::size_t count, DType type, int peer, int tag,
                     Mode mode) override;
  Request start_recv(void* data, std::size_t count, DType type, int peer, int tag,
                     Mode mode) override;

private:
  std::unique_ptr<Comm> inner_;
  StagingCopies copies_;
  std::string name_;
  // Shared with the requests, which may outlive the communicator.
  std::shared_ptr<StagingPool> pool_;
};

} // namespace gridlm::parallel
