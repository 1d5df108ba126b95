// Kokkos start-up and shut-down.
#include "layers/kokkos_runtime.hpp"

#include <Kokkos_Core.hpp>

#include <fmt/format.h>

namespace gridlm::layers {

KokkosRuntime::KokkosRuntime(int& argc, char** argv) {
  if (!Kokkos::is_initialized()) Kokkos::initialize(argc, argv);
}

KokkosRuntime::~KokkosRuntime() {
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

std::string kokkos_description() {
  return fmt::format("Kokkos {}.{}.{}, execution space {}", KOKKOS_VERSION / 10000,
                     KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100,
                     Kokkos::DefaultExecutionSpace::name());
}

} // namespace gridlm::layers
