// Shared helpers for layer kernels: the parallel loops (team_loops.hpp), bf16 rounding, and the
// matrix product every linear layer and attention head uses. Kernels take raw pointers into the
// flat parameter/activation buffers (llm.c's convention: outputs, inputs, weights, sizes).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

#include "layers/team_loops.hpp"

namespace gridlm::layers {

// data[0, n) = 0
void fill_zero(float* data, long n);
// dst[0, n) = src[0, n) (device buffers)
void copy(float* dst, const float* src, long n);

// The precision of the matrix products (train.precision). bf16: every GEMM operand (weights,
// activations, output gradients) rounded to bfloat16, products accumulated in fp32, outputs in
// fp32, as tensor cores compute them; master weights, moments, LayerNorm, softmax, GELU and the
// loss stay in fp32. A bf16 value is exact in a float, and so is the product of two, so an fp32
// GEMM on rounded operands gives what a bf16 GEMM with fp32 accumulation gives, up to the
// order of the sum.
enum class Precision { fp32, bf16 };

// x rounded to the nearest bfloat16 (ties to even), kept in a float: the top 16 bits of its
// fp32 pattern. Infinities stay, NaN stays NaN, finite values past the bf16 range become inf.
KOKKOS_INLINE_FUNCTION float round_to_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    bits |= 0x00400000u; // a NaN: quiet, and it must not round into an infinity
  } else {
    bits += 0x7fffu + ((bits >> 16) & 1u);
  }
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// data[0, n) rounded to bf16 in place (a buffer that only matrix products read).
void round_to_bf16(float* data, long n);
// dst[0, n) = src[0, n) rounded to bf16.
void round_to_bf16(float* dst, const float* src, long n);

// Whether a GEMM operand is used as stored or transposed.
enum class Transpose { no, yes };
// Whether a backward writes a gradient buffer afresh or adds to it: a buffer with one writer is
// overwritten, which saves zeroing it every step.
enum class GradWrite { accumulate, overwrite };

// out[m,n] = alpha * op(a) @ op(b) + beta * out, row-major; op(a) is [m,k], op(b) is [k,n].
// a is [m,k] (or [k,m] when trans_a is yes), b is [k,n] (or [n,k] when trans_b is yes).
// Precision::bf16 promises that a and b hold bf16 values (round_to_bf16): a GPU then multiplies
// them on its tensor cores in bf16 with fp32 accumulation (cublasGemmEx, compute type
// CUBLAS_COMPUTE_32F_FAST_16BF, whose conversion of such values is exact), a CPU in fp32, which
// for them is the same product; out stays fp32 either way.
void matmul(float* out, const float* a, Transpose trans_a, const float* b, Transpose trans_b,
            long m, long n, long k, float alpha, float beta, Precision precision = Precision::fp32);

// out[i] = alpha * op(a[i]) @ op(b[i]) + beta * out[i] for i in [0, batch), matrix i of each
// operand at its base + i * its stride (shapes as matmul's): one strided-batched GEMM on a GPU,
// where a launch per small product would leave it idle; on a CPU, matmul after matmul.
void matmul_batched(float* out, long out_stride, const float* a, long a_stride, Transpose trans_a,
                    const float* b, long b_stride, Transpose trans_b, long m, long n, long k,
                    float alpha, float beta, long batch, Precision precision = Precision::fp32);

} // namespace gridlm::layers
