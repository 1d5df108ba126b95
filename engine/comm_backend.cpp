// Backend choice for the model's communicators.
#include "engine/comm_backend.hpp"

#include "parallel/comm_mpi.hpp"
#include "parallel/comm_staged.hpp"

#include <Kokkos_Core.hpp>

#include <type_traits>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"
#if defined(GRIDLM_HAVE_NCCL)
#include "parallel/comm_nccl.hpp"
#include "parallel/cuda_check.hpp"
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

// Whether MPI can be handed the model's buffers as they are: host memory, or device memory of
// a GPU-aware MPI (asked at run time: the same binary may meet another MPI on another machine).
bool mpi_reads_model_memory() {
  if (!kokkos_on_device) return true;
#if defined(KOKKOS_ENABLE_CUDA)
  return parallel::mpi_reads_cuda_memory();
#else
  return false;
#endif
}

parallel::StagingCopies kokkos_copies() {
  using Device = Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space,
                              Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using ConstDevice = Kokkos::View<const char*, Kokkos::DefaultExecutionSpace::memory_space,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Host = Kokkos::View<char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using ConstHost =
      Kokkos::View<const char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  parallel::StagingCopies copies{
      [](void* host, const void* device, std::size_t bytes) {
        Kokkos::deep_copy(Host(static_cast<char*>(host), bytes),
                          ConstDevice(static_cast<const char*>(device), bytes));
      },
      [](void* device, const void* host, std::size_t bytes) {
        Kokkos::deep_copy(Device(static_cast<char*>(device), bytes),
                          ConstHost(static_cast<const char*>(host), bytes));
      }};
#if defined(KOKKOS_ENABLE_CUDA)
  // Pinned, so that the copies run at the bus's speed; the pool keeps them, since pinning costs
  // milliseconds per buffer.
  copies.allocate = [](std::size_t bytes) {
    return Kokkos::kokkos_malloc<Kokkos::CudaHostPinnedSpace>("gridlm::StagedComm", bytes);
  };
  copies.release = [](void* host, std::size_t) {
    Kokkos::kokkos_free<Kokkos::CudaHostPinnedSpace>(host);
  };
#endif
  return copies;
}

} // namespace

std::string resolve_backend(const std::string& configured) {
  if (configured == "mpi") {
    if (!mpi_reads_model_memory()) {
      throw Error("parallel.backend = \"mpi\": the model's buffers are in GPU memory and this MPI "
                  "cannot read it in every call gridlm makes (MPICH says so at run time; Open "
                  "MPI's CUDA support leaves out non-blocking collectives); use \"mpi-staged\" "
                  "(copies through host memory), \"nccl\", or \"auto\"");
    }
    return "mpi";
  }
  if (configured == "mpi-staged") return "mpi-staged";
  if (configured == "auto") {
    if (have_nccl && kokkos_on_device) return "nccl";
    return mpi_reads_model_memory() ? "mpi" : "mpi-staged";
  }
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
  throw Error(fmt::format(
      "parallel.backend = \"{}\": the backends are auto, mpi, mpi-staged and nccl", configured));
}

std::string mpi_backend() { return mpi_reads_model_memory() ? "mpi" : "mpi-staged"; }

std::unique_ptr<parallel::Comm> make_comm(parallel::MpiCommHandle handle, const char* name,
                                          const std::string& backend, parallel::WaitFor waits) {
#if defined(GRIDLM_HAVE_NCCL)
  if (backend == "nccl") {
#if defined(KOKKOS_ENABLE_CUDA)
    // NCCL on the GPU Kokkos computes on (chosen from the launcher's local rank or
    // --kokkos-device-id), which a local-rank rule of our own could contradict; its operations
    // wait on Kokkos' stream, so they read what the kernels queued before them wrote.
    const Kokkos::Cuda kokkos;
    GRIDLM_CUDA_CHECK(cudaSetDevice(kokkos.cuda_device()));
    auto comm = std::make_unique<parallel::NcclComm>(handle, nullptr, kokkos.cuda_stream());
#else
    auto comm = std::make_unique<parallel::NcclComm>(handle);
#endif
    comm->set_identity(name, parallel::world_ranks(*handle));
    return comm;
  }
#endif
  if (backend == "mpi-staged") {
    auto comm = std::make_unique<parallel::StagedComm>(
        std::make_unique<parallel::MpiComm>(handle, name, waits), kokkos_copies());
    comm->set_identity(name, parallel::world_ranks(*handle));
    return comm;
  }
  return std::make_unique<parallel::MpiComm>(handle, name, waits);
}

std::unique_ptr<parallel::Comm> make_axis_comm(const parallel::Grid& grid, parallel::Axis axis,
                                               const std::string& backend) {
  return make_comm(grid.axis_handle(axis), parallel::axis_name(axis), backend,
                   parallel::axis_waits(axis));
}

} // namespace gridlm::engine
