// matmul through KokkosBlas::gemm on unmanaged row-major views (vendor BLAS underneath); where
// Kokkos runs on CUDA, matmul and matmul_batched through cuBLAS (tensor cores for bf16).
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

#if defined(KOKKOS_ENABLE_CUDA)
namespace {

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(fmt::format("{} failed: {} ({}); on {}", call, cublasGetStatusString(status),
                            int(status), where()));
  }
}

// One handle for the process, on Kokkos' stream so that products stay ordered with the kernels
// around them. Destroyed when Kokkos finalises, before the device goes: a handle left to the
// end of the process would be torn down after the CUDA context it belongs to.
cublasHandle_t cublas_handle() {
  static const cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    check_cublas(cublasSetStream(h, Kokkos::DefaultExecutionSpace().cuda_stream()),
                 "cublasSetStream");
    Kokkos::push_finalize_hook([h] { cublasDestroy(h); });
    return h;
  }();
  return handle;
}

// fp32 products exactly as SGEMM computes them; bf16 ones on the tensor cores.
cublasComputeType_t compute_type(Precision precision) {
  return precision == Precision::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first, no transposes added;
// leading dimensions are the row lengths as stored. A batch of one is one plain GEMM.
void cublas_gemm(float* out, long out_stride, const float* a, long a_stride, Transpose trans_a,
                 const float* b, long b_stride, Transpose trans_b, long m, long n, long k,
                 float alpha, float beta, long batch, Precision precision) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) { // no products: out = beta * out, which cuBLAS would refuse (a leading dimension 0)
    const long size = m * n;
    for_each(
        "layers::matmul::scale", batch * size, KOKKOS_LAMBDA(long e) {
          float& o = out[(e / size) * out_stride + e % size];
          o = beta == 0.0f ? 0.0f : beta * o;
        });
    return;
  }
  const bool ta = trans_a == Transpose::yes, tb = trans_b == Transpose::yes;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = int(ta ? m : k), ldb = int(tb ? k : n), ldc = int(n);
  if (batch == 1) {
    check_cublas(cublasGemmEx(cublas_handle(), op_b, op_a, int(n), int(m), int(k), &alpha, b,
                              CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, out, CUDA_R_32F, ldc,
                              compute_type(precision), CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  } else {
    check_cublas(cublasGemmStridedBatchedEx(
                     cublas_handle(), op_b, op_a, int(n), int(m), int(k), &alpha, b, CUDA_R_32F,
                     ldb, b_stride, a, CUDA_R_32F, lda, a_stride, &beta, out, CUDA_R_32F, ldc,
                     out_stride, int(batch), compute_type(precision), CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  }
}

} // namespace
#endif

void matmul(float* out, const float* a, Transpose transpose_a, const float* b,
            Transpose transpose_b, long m, long n, long k, float alpha, float beta,
            Precision precision) {
#if defined(KOKKOS_ENABLE_CUDA)
  // cuBLAS itself rather than through Kokkos Kernels, whose GEMM is its own (slow) kernel when
  // it was built without the cuBLAS TPL.
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>) {
    cublas_gemm(out, 0, a, 0, transpose_a, b, 0, transpose_b, m, n, k, alpha, beta, 1, precision);
  } else
#endif
  {
    // A CPU multiplies bf16 values in fp32: the same product (kernels.hpp).
    (void)precision;
    const bool trans_a = transpose_a == Transpose::yes, trans_b = transpose_b == Transpose::yes;
    using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    using CMat = Kokkos::View<const float**, Kokkos::LayoutRight, Unmanaged>;
    using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Unmanaged>;
    const CMat av(a, trans_a ? k : m, trans_a ? m : k);
    const CMat bv(b, trans_b ? n : k, trans_b ? k : n);
    const Mat cv(out, m, n);
    KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", alpha, av, bv, beta, cv);
  }
}

void matmul_batched(float* out, long out_stride, const float* a, long a_stride, Transpose trans_a,
                    const float* b, long b_stride, Transpose trans_b, long m, long n, long k,
                    float alpha, float beta, long batch, Precision precision) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>) {
    cublas_gemm(out, out_stride, a, a_stride, trans_a, b, b_stride, trans_b, m, n, k, alpha, beta,
                batch, precision);
  } else
#endif
  {
    for (long i = 0; i < batch; ++i) {
      matmul(out + i * out_stride, a + i * a_stride, trans_a, b + i * b_stride, trans_b, m, n, k,
             alpha, beta, precision);
    }
  }
}

} // namespace gridlm::layers
