// matmul through KokkosBlas::gemm on unmanaged row-major views (vendor BLAS underneath);
// matmul_batched through cuBLAS where Kokkos runs on CUDA.
#include "layers/kernels.hpp"

#include <KokkosBlas3_gemm.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cublas_v2.h>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"
#endif

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

float* column_sum_scratch(std::size_t floats) {
  // Released by Kokkos::finalize: a view left to static destruction would outlive the device.
  static Kokkos::View<float*> scratch;
  if (scratch.size() < floats) {
    if (scratch.size() == 0) Kokkos::push_finalize_hook([] { scratch = Kokkos::View<float*>(); });
    scratch = Kokkos::View<float*>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "layers::column_sums::partials"), floats);
  }
  return scratch.data();
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

#if defined(KOKKOS_ENABLE_CUDA)
namespace {

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(fmt::format("{} failed: {} ({}); on {}", call, cublasGetStatusString(status),
                            int(status), where()));
  }
}

// One handle for the process, on Kokkos' stream so that products stay ordered with the kernels
// around them. Never destroyed: it would outlive Kokkos' finalisation of the device, and the
// driver frees it with the process.
cublasHandle_t cublas_handle() {
  static const cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    check_cublas(cublasSetStream(h, Kokkos::DefaultExecutionSpace().cuda_stream()),
                 "cublasSetStream");
    return h;
  }();
  return handle;
}

} // namespace
#endif

void matmul_batched(float* out, long out_stride, const float* a, long a_stride, Transpose trans_a,
                    const float* b, long b_stride, Transpose trans_b, long m, long n, long k,
                    float alpha, float beta, long batch) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>) {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first, no transposes
    // added; leading dimensions are the row lengths as stored.
    const bool ta = trans_a == Transpose::yes, tb = trans_b == Transpose::yes;
    check_cublas(cublasSgemmStridedBatched(cublas_handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k),
                                           &alpha, b, int(tb ? k : n), b_stride, a, int(ta ? m : k),
                                           a_stride, &beta, out, int(n), out_stride, int(batch)),
                 "cublasSgemmStridedBatched");
  } else
#endif
  {
    for (long i = 0; i < batch; ++i) {
      matmul(out + i * out_stride, a + i * a_stride, trans_a, b + i * b_stride, trans_b, m, n, k,
             alpha, beta);
    }
  }
}

} // namespace gridlm::layers
