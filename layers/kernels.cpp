// matmul through KokkosBlas::gemm on unmanaged row-major views (vendor BLAS underneath).
#include "layers/kernels.hpp"

#include <KokkosBlas3_gemm.hpp>

namespace gridlm::layers {

void fill_zero(float* data, long n) {
  for_each(
      "layers::fill_zero", n, KOKKOS_LAMBDA(long i) { data[i] = 0.0f; });
}

void copy(float* dst, const float* src, long n) {
  for_each(
      "layers::copy", n, KOKKOS_LAMBDA(long i) { dst[i] = src[i]; });
}

void round_to_bf16(float* data, long n) {
  for_each(
      "layers::round_to_bf16", n, KOKKOS_LAMBDA(long i) { data[i] = round_to_bf16(data[i]); });
}

void round_to_bf16(float* dst, const float* src, long n) {
  for_each(
      "layers::round_to_bf16", n, KOKKOS_LAMBDA(long i) { dst[i] = round_to_bf16(src[i]); });
}

void matmul(float* out, const float* a, Transpose transpose_a, const float* b,
            Transpose transpose_b, long m, long n, long k, float alpha, float beta) {
  const bool trans_a = transpose_a == Transpose::yes, trans_b = transpose_b == Transpose::yes;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using CMat = Kokkos::View<const float**, Kokkos::LayoutRight, Unmanaged>;
  using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Unmanaged>;
  const CMat av(a, trans_a ? k : m, trans_a ? m : k);
  const CMat bv(b, trans_b ? n : k, trans_b ? k : n);
  const Mat cv(out, m, n);
  KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", alpha, av, bv, beta, cv);
}

} // namespace gridlm::layers
