// Shared helpers for layer kernels: a labelled parallel loop over a range, and the matrix
// product every linear layer and attention head uses. Kernels take raw pointers into the flat
// parameter/activation buffers (llm.c's convention: outputs, inputs, weights, sizes).
#pragma once

#include <Kokkos_Core.hpp>

namespace gridlm::layers {

// Runs f(i) for i in [0, n) on the default execution space, under `label` for profilers.
template <class F>
void for_each(const char* label, long n, const F& f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, long>(0, n), f);
}

// data[0, n) = 0
void fill_zero(float* data, long n);
// dst[0, n) = src[0, n) (device buffers)
void copy(float* dst, const float* src, long n);

// Reductions over rows into per-column sums (weight gradients) walk column blocks of this width,
// so that each block reads contiguous memory and owns its outputs.
constexpr int column_block = 64;
inline long column_blocks(long C) { return (C + column_block - 1) / column_block; }

// Whether a GEMM operand is used as stored or transposed.
enum class Transpose { no, yes };
// Whether a backward writes a gradient buffer afresh or adds to it: a buffer with one writer is
// overwritten, which saves zeroing it every step.
enum class GradWrite { accumulate, overwrite };

// out[m,n] = alpha * op(a) @ op(b) + beta * out, row-major; op(a) is [m,k], op(b) is [k,n].
// a is [m,k] (or [k,m] when trans_a is yes), b is [k,n] (or [n,k] when trans_b is yes).
void matmul(float* out, const float* a, Transpose trans_a, const float* b, Transpose trans_b,
            long m, long n, long k, float alpha, float beta);

} // namespace gridlm::layers
