// Benchmark helper: single-core SGEMM throughput through the same path the layers use
// (layers::matmul -> Kokkos Kernels -> vendor BLAS), the ceiling MFU is measured against.
// Prints the median GFLOP/s of square products. Usage: bench_sgemm_peak [n] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "layers/kernels.hpp"
#include "layers/kokkos_runtime.hpp"

int main(int argc, char** argv) {
  gridlm::layers::KokkosRuntime kokkos(argc, argv);
  const long n = argc > 1 ? std::atol(argv[1]) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  gridlm::layers::matmul(c.data(), a.data(), gridlm::layers::Transpose::no, b.data(),
                         gridlm::layers::Transpose::yes, n, n, n, 1.0f, 0.0f);
  std::vector<double> gflops;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    gridlm::layers::matmul(c.data(), a.data(), gridlm::layers::Transpose::no, b.data(),
                           gridlm::layers::Transpose::yes, n, n, n, 1.0f, 0.0f);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gflops.push_back(2.0 * n * n * n / s / 1e9);
  }
  std::sort(gflops.begin(), gflops.end());
  std::printf("RESULT sgemm_gflops=%.1f n=%ld reps=%d\n", gflops[gflops.size() / 2], n, reps);
  return 0;
}
