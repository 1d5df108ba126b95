// Which communication backend carries the model's collectives: MPI (host buffers) or NCCL
// (device buffers, CUDA builds). parallel.backend = auto picks NCCL when this build has it and
// Kokkos computes on a device, MPI otherwise.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

// Checks the configured name ("auto", "mpi", "nccl") against this build and returns the
// backend to use. Throws gridlm::Error naming the fix for "nccl" in a build without it.
std::string resolve_backend(const std::string& configured);

// Collective over the axis: a Comm of the resolved backend (NCCL also selects the rank's GPU).
std::unique_ptr<parallel::Comm> make_axis_comm(const parallel::Grid& grid, parallel::Axis axis,
                                               const std::string& backend);

} // namespace gridlm::engine
