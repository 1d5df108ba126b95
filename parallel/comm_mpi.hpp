// The MPI backend of parallel::Comm: host buffers, non-blocking MPI collectives.
#pragma once

#include <string>
#include <vector>

#include "parallel/comm.hpp"
#include "parallel/mpi_comm_handle.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::parallel {

// Rank and size of a communicator, checked.
int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
// The MPI_COMM_WORLD rank of each rank of the communicator.
std::vector<int> world_ranks(MPI_Comm comm);
// Collective: every rank's `text` becomes `root`'s.
void broadcast_text(MPI_Comm comm, std::string& text, int root = 0);
// Collective: the ranks sharing memory with this one (a node); tests may pretend nodes hold
// `simulate_ranks_per_node` consecutive ranks.
MpiCommHandle split_nodes(MPI_Comm world, int simulate_ranks_per_node = 0);
// Whether this MPI library, as running, can read and write CUDA device memory in every call
// gridlm makes, non-blocking collectives included (MPICH's MPIX_GPU_query_support; false for
// Open MPI, whose CUDA support leaves those out, and where neither exists).
bool mpi_reads_cuda_memory();

class MpiComm final : public Comm {
public:
  // axis: how the flight recorder names it (a literal); waits: what its ranks wait for.
  explicit MpiComm(MpiCommHandle comm, const char* axis = "comm", WaitFor waits = WaitFor::peers);
  const char* backend() const override { return "mpi"; }
  MPI_Comm raw() const { return *comm_; }

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
  MpiCommHandle comm_;
  WaitFor waits_;
};

} // namespace gridlm::parallel
