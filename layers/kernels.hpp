// Shared helpers for layer kernels: a labelled parallel loop over a range, and the matrix
// product every linear layer and attention head uses. Kernels take raw pointers into the flat
// parameter/activation buffers (llm.c's convention: outputs, inputs, weights, sizes).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace gridlm::layers {

// Runs f(i) for i in [0, n) on the default execution space, under `label` for profilers.
template <class F>
void for_each(const char* label, long n, const F& f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, long>(0, n), f);
}

// A team of threads working on one row (see for_each_row).
using Team = Kokkos::TeamPolicy<Kokkos::DefaultExecutionSpace>::member_type;

// Whether the default execution space is a CPU backend (it reaches host memory), whose teams
// for_each_row makes one thread each: their row loops are then plain loops, which the compiler
// vectorizes (a TeamThreadRange steps by a stride it cannot see, and on Serial that cost
// LayerNorm a fifth of its time). GRIDLM_TEAM_SIZE=n (a compile definition) makes CPU teams
// n threads sharing each row as a GPU's do, to test that code on an OpenMP Kokkos
// (docs/gpu.md).
#if defined(GRIDLM_TEAM_SIZE)
constexpr bool host_teams = false;
constexpr int forced_team_size = GRIDLM_TEAM_SIZE;
#else
constexpr bool host_teams =
    Kokkos::SpaceAccessibility<Kokkos::DefaultExecutionSpace, Kokkos::HostSpace>::accessible;
constexpr int forced_team_size = 0;
#endif

// Runs f(team) for each of n rows, the row being team.league_rank(): the team's threads share
// the row's work (team_sum, team_max, team_for), as a GPU needs to keep its thousands of threads
// busy when rows are few and long. On a CPU a team is one thread, and the row's loops run in
// order, as a RangePolicy over rows ran them.
template <class F>
void for_each_row(const char* label, long n, const F& f) {
  using Policy = Kokkos::TeamPolicy<Kokkos::DefaultExecutionSpace>;
  if constexpr (host_teams) {
    Kokkos::parallel_for(label, Policy(int(n), 1), f);
  } else if constexpr (forced_team_size > 0) {
    Kokkos::parallel_for(label, Policy(int(n), forced_team_size), f);
  } else {
    Kokkos::parallel_for(label, Policy(int(n), Kokkos::AUTO), f);
  }
}

// The sum of f(j) for j in [0, n), over the team's threads; every thread gets it.
template <class F>
KOKKOS_INLINE_FUNCTION float team_sum(const Team& team, long n, const F& f) {
  float sum = 0.0f;
  if constexpr (host_teams) {
    for (long j = 0; j < n; ++j)
      sum += f(j);
  } else {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n), [&](long j, float& acc) { acc += f(j); }, sum);
  }
  return sum;
}

// Two sums at once: f(j, a, b) sets a row element's two terms, sum_a and sum_b get their sums.
// One pass over the row on a CPU; on a GPU two team reductions.
template <class F>
KOKKOS_INLINE_FUNCTION void team_sums(const Team& team, long n, const F& f, float& sum_a,
                                      float& sum_b) {
  sum_a = 0.0f;
  sum_b = 0.0f;
  if constexpr (host_teams) {
    for (long j = 0; j < n; ++j) {
      float a, b;
      f(j, a, b);
      sum_a += a;
      sum_b += b;
    }
  } else {
    sum_a = team_sum(team, n, [&](long j) {
      float a, b;
      f(j, a, b);
      return a;
    });
    sum_b = team_sum(team, n, [&](long j) {
      float a, b;
      f(j, a, b);
      return b;
    });
  }
}

// The largest of x[0, n) and `floor`, over the team's threads; every thread gets it.
KOKKOS_INLINE_FUNCTION float team_max(const Team& team, const float* x, long n, float floor) {
  float largest = floor;
  if constexpr (host_teams) {
    for (long j = 0; j < n; ++j)
      largest = x[j] > largest ? x[j] : largest;
  } else {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](long j, float& acc) { acc = x[j] > acc ? x[j] : acc; }, Kokkos::Max<float>(largest));
  }
  return largest > floor ? largest : floor;
}

// Runs f(j) for j in [0, n), shared among the team's threads.
template <class F>
KOKKOS_INLINE_FUNCTION void team_for(const Team& team, long n, const F& f) {
  if constexpr (host_teams) {
    for (long j = 0; j < n; ++j)
      f(j);
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), f);
  }
}

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

// out[i] = alpha * op(a[i]) @ op(b[i]) + beta * out[i] for i in [0, batch), matrix i of each
// operand at its base + i * its stride (shapes as matmul's): one strided-batched GEMM on a GPU,
// where a launch per small product would leave it idle; on a CPU, matmul after matmul.
void matmul_batched(float* out, long out_stride, const float* a, long a_stride, Transpose trans_a,
                    const float* b, long b_stride, Transpose trans_b, long m, long n, long k,
                    float alpha, float beta, long batch);

} // namespace gridlm::layers
