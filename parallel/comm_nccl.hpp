// The NCCL backend of parallel::Comm: device buffers, operations queued on one CUDA stream.
// The NCCL unique id travels from rank 0 to the others over the axis' MPI communicator.
// NCCL has no message tags: point-to-point transfers between two ranks match in posting order,
// which the pipeline executor guarantees; the tag argument is ignored.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <optional>

#include "parallel/comm.hpp"
#include "parallel/mpi_comm_handle.hpp"

namespace gridlm::parallel {

class NcclComm final : public Comm {
public:
  // Collective over `comm`. Uses the current CUDA device; pass a stream or let it create one.
  // `after`: a stream (the legacy default stream 0 included) whose work queued before an
  // operation must be done before the operation runs: the stream the kernels that write its
  // buffers run on. The stream waits for it; the host does not.
  explicit NcclComm(MpiCommHandle comm, cudaStream_t stream = nullptr,
                    std::optional<cudaStream_t> after = std::nullopt);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const char* backend() const override { return "nccl"; }
  cudaStream_t stream() const { return stream_; }
  void begin_group() override;
  void end_group() override;

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
  // A request that completes when the stream reaches the point where it was recorded.
  Request record();
  // Makes the stream wait for what `after_` holds now: before an operation outside a group, and
  // at the end of the outermost group, where its operations start.
  void follow_after();
  // Throws when an earlier wait aborted the communicator (it must not be used again).
  void refuse_if_aborted() const;

  MpiCommHandle mpi_;
  ncclComm_t nccl_ = nullptr;
  // Shared with the requests, which poll it while they wait: set when one found NCCL's
  // asynchronous error and aborted the communicator (which is then not destroyed).
  std::shared_ptr<bool> aborted_ = std::make_shared<bool>(false);
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  bool follow_ = false;              // whether operations wait for after_
  cudaStream_t after_ = nullptr;     // (0 is the legacy default stream, not "none")
  cudaEvent_t after_done_ = nullptr; // recorded on after_, waited for on stream_
  std::shared_ptr<int> group_depth_ = std::make_shared<int>(0); // open begin_group() calls
};

// Selects this rank's GPU: local rank on the node modulo the devices it sees. Returns the id.
int select_local_device(MPI_Comm node_comm);

} // namespace gridlm::parallel
