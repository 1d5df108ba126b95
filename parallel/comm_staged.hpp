// parallel::StagedComm: a communicator for device buffers over an MPI that cannot read device
// memory. Each operation copies its input into a host buffer, runs the wrapped communicator's
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

// Byte copies between the caller's (device) memory and host memory.
struct StagingCopies {
  std::function<void(void* host, const void* device, std::size_t bytes)> to_host;
  std::function<void(void* device, const void* host, std::size_t bytes)> to_device;
};

class StagedComm final : public Comm {
public:
  StagedComm(std::unique_ptr<Comm> inner, StagingCopies copies);
  // The wrapped backend's name with "-staged": "mpi-staged".
  const char* backend() const override { return name_.c_str(); }

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
};

} // namespace gridlm::parallel
