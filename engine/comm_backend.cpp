// Backend choice for the model's communicators.
#include "engine/comm_backend.hpp"

#include "parallel/comm_mpi.hpp"

#include <Kokkos_Core.hpp>

#include <type_traits>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"
#if defined(GRIDLM_HAVE_NCCL)
#include "parallel/comm_nccl.hpp"
#endif

namespace gridlm::engine {
namespace {

constexpr bool kokkos_on_device =
    !std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>;

#if defined(GRIDLM_HAVE_NCCL)
constexpr bool have_nccl = true;
#else
constexpr bool have_nccl = false;
#endif

} // namespace

std::string resolve_backend(const std::string& configured) {
  if (configured == "mpi") return "mpi";
  if (configured == "auto") return have_nccl && kokkos_on_device ? "nccl" : "mpi";
  if (configured == "nccl") {
    if (!have_nccl) {
      throw Error("parallel.backend = \"nccl\": this gridlm was built without NCCL; rebuild with "
                  "-DGRIDLM_ENABLE_CUDA=ON -DGRIDLM_ENABLE_NCCL=ON, or use \"mpi\"");
    }
    if (!kokkos_on_device) {
      throw Error("parallel.backend = \"nccl\": Kokkos computes on the host in this build, and "
                  "NCCL needs device buffers; use a CUDA-enabled Kokkos, or \"mpi\"");
    }
    return "nccl";
  }
  throw Error(
      fmt::format("parallel.backend = \"{}\": the backends are auto, mpi and nccl", configured));
}

std::unique_ptr<parallel::Comm> make_axis_comm(const parallel::Grid& grid, parallel::Axis axis,
                                               const std::string& backend) {
#if defined(GRIDLM_HAVE_NCCL)
  if (backend == "nccl") {
    parallel::select_local_device(grid.node_comm());
    auto comm = std::make_unique<parallel::NcclComm>(grid.axis_handle(axis));
    comm->set_identity(parallel::axis_name(axis), parallel::world_ranks(grid.axis_comm(axis)));
    return comm;
  }
#endif
  (void)backend;
  return grid.make_mpi_comm(axis);
}

} // namespace gridlm::engine
