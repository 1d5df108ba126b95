// Which communication backend carries the model's collectives: MPI (host buffers, or device
// buffers of a GPU-aware MPI), MPI staged through host copies (device buffers, an MPI that
// cannot read them) or NCCL (device buffers, CUDA builds). parallel.backend = auto picks NCCL
// when this build has it and Kokkos computes on a device; else MPI, staged when MPI says at run
// time that it cannot read the device's memory.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm.hpp"
#include "parallel/grid.hpp"
#include "parallel/mpi_comm_handle.hpp"

namespace gridlm::engine {

// Checks the configured name ("auto", "mpi", "mpi-staged", "nccl") against this build and the
// MPI library and returns the backend to use ("mpi", "mpi-staged" or "nccl"). Throws
// gridlm::Error naming the fix for "nccl" in a build without it, and for "mpi" where MPI
// cannot read the model's memory. Collective only in that every rank asks the same library.
std::string resolve_backend(const std::string& configured);

// The MPI backend for the model's buffers: "mpi" where MPI can read them, else "mpi-staged"
// (what carries a pipeline's transfers under "nccl" when they cannot go in NCCL's groups).
std::string mpi_backend();

// Collective over `comm`: a Comm of the resolved backend named `name` (a string that outlives
// it), whose ranks wait for `waits`. NCCL runs on the GPU and after the stream that Kokkos
// computes on.
std::unique_ptr<parallel::Comm> make_comm(parallel::MpiCommHandle comm, const char* name,
                                          const std::string& backend,
                                          parallel::WaitFor waits = parallel::WaitFor::peers);
// The same over one axis of the grid, waiting as its ranks do (parallel::axis_waits).
std::unique_ptr<parallel::Comm> make_axis_comm(const parallel::Grid& grid, parallel::Axis axis,
                                               const std::string& backend);

} // namespace gridlm::engine
