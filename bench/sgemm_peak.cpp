// Benchmark helper: GEMM throughput through the same path the layers use (layers::matmul ->
// Kokkos Kernels -> vendor BLAS on a CPU; cuBLAS on a GPU, on the tensor cores for bf16), the
// ceiling MFU is measured against. Operands live in the execution space's memory, and each
// product is fenced, so a GPU's asynchronous launch is timed to its end. Prints the median
// GFLOP/s of square products. Usage: bench_sgemm_peak [n] [reps] [fp32|bf16]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "layers/kernels.hpp"
#include "layers/kokkos_runtime.hpp"

int main(int argc, char** argv) {
  using namespace gridlm::layers;
  KokkosRuntime kokkos(argc, argv);
  const long n = argc > 1 ? std::atol(argv[1]) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  const std::string precision_name = argc > 3 ? argv[3] : "fp32";
  if (n < 1 || reps < 1 || (precision_name != "fp32" && precision_name != "bf16")) {
    std::fprintf(stderr, "usage: bench_sgemm_peak [n > 0] [reps > 0] [fp32|bf16]\n");
    return 2;
  }
  const Precision precision = precision_name == "bf16" ? Precision::bf16 : Precision::fp32;
  // bf16 values (exactly representable) so that both precisions multiply the same numbers;
  // varied ones in [-1, 1), as a model's are: a GPU multiplying constants draws less power and
  // holds higher clocks than it would in training.
  Kokkos::View<float*> a("a", n * n), b("b", n * n), c("c", n * n);
  float* pa = a.data();
  float* pb = b.data();
  for_each(
      "bench::sgemm_peak::fill", n * n, KOKKOS_LAMBDA(long i) {
        std::uint32_t h = std::uint32_t(i) * 2654435761u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        pa[i] = round_to_bf16(float(h & 0xffffu) / 32768.0f - 1.0f);
        pb[i] = round_to_bf16(float(h >> 16) / 32768.0f - 1.0f);
      });
  Kokkos::fence();
  const auto product = [&] {
    matmul(c.data(), a.data(), Transpose::no, b.data(), Transpose::yes, n, n, n, 1.0f, 0.0f,
           precision);
    Kokkos::fence();
  };
  product();
  std::vector<double> gflops;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    product();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gflops.push_back(2.0 * n * n * n / s / 1e9);
  }
  std::sort(gflops.begin(), gflops.end());
  std::printf("RESULT sgemm_gflops=%.1f n=%ld reps=%d precision=%s\n", gflops[gflops.size() / 2], n,
              reps, precision_name.c_str());
  return 0;
}
