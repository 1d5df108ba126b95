// Kokkos start-up and shut-down.
#include "layers/kokkos_runtime.hpp"

#include <Kokkos_Core.hpp>

#include <fmt/format.h>

#include "layers/blas_info.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace gridlm::layers {
namespace {

// The host threads Kokkos computes with (1 when it computes on a device).
int kokkos_threads() {
  if (!std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>::value) {
    return 1;
  }
  // An instance call: concurrency() is static in Kokkos 3 and a member in Kokkos 4.
  return std::max(1, int(Kokkos::DefaultHostExecutionSpace().concurrency()));
}

} // namespace

KokkosRuntime::KokkosRuntime(int& argc, char** argv) {
  if (Kokkos::is_initialized()) return;
  // Kokkos takes only its own --kokkos-* arguments: it would answer a plain --help with its
  // own page, in front of gridlm's. Those are removed from argv, as Kokkos would do.
  std::vector<char*> mine{argv[0]}, rest{argv[0]};
  for (int i = 1; i < argc; ++i)
    (std::strncmp(argv[i], "--kokkos-", 9) == 0 ? mine : rest).push_back(argv[i]);
  int n = int(mine.size());
  Kokkos::initialize(n, mine.data());
  // A rank's BLAS threads as many as its Kokkos ones, unless the environment says otherwise.
  default_blas_threads(kokkos_threads());
  argc = int(rest.size());
  std::copy(rest.begin(), rest.end(), argv);
  argv[argc] = nullptr;
}

KokkosRuntime::~KokkosRuntime() {
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

std::string kokkos_description() {
  return fmt::format("Kokkos {}.{}.{}, execution space {}", KOKKOS_VERSION / 10000,
                     KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100,
                     Kokkos::DefaultExecutionSpace::name());
}

int compute_threads_per_rank() {
  // On a device the products are cuBLAS's too: the host thread only launches.
  if (!std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>::value) {
    return 1;
  }
  // Kokkos' loops and the BLAS's products take turns, each with its own threads.
  return std::max(kokkos_threads(), blas_threads());
}

} // namespace gridlm::layers
