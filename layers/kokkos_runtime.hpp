// KokkosRuntime: Kokkos::initialize on construction, Kokkos::finalize on destruction, and a
// description of the execution space for start-up reports.
#pragma once

#include <string>

namespace gridlm::layers {

class KokkosRuntime {
public:
  KokkosRuntime(int& argc, char** argv);
  ~KokkosRuntime();
  KokkosRuntime(const KokkosRuntime&) = delete;
  KokkosRuntime& operator=(const KokkosRuntime&) = delete;
};

// "Kokkos 3.4.1, execution space Serial"
std::string kokkos_description();

// The cores one rank computes on: the more of its Kokkos host threads (OpenMP; Serial 1) and
// its BLAS threads; 1 when kernels and products run on a device (the host thread launches them).
int compute_threads_per_rank();

} // namespace gridlm::layers
