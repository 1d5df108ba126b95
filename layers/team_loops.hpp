// Loops shaped for a GPU and a CPU alike: a team of threads per row (LayerNorm, softmax, the
// cross-entropy) and per-column sums over rows (weight gradients). On a GPU a team's threads
// share a row; on a CPU a team is one thread and its loops are plain, vectorizable ones.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>

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

// Runs f(n, j) for every row n in [0, rows) and column j in [0, cols): element-wise work on
// row-major matrices (copies, biases, residuals). On a CPU a thread per row walks its columns
// in order, a loop the compiler vectorizes; on a GPU a thread per element, neighbouring threads
// on neighbouring columns, so that their loads and stores coalesce (a thread walking a row
// would touch addresses a whole row apart from its neighbours').
template <class F>
void for_each_element(const char* label, long rows, long cols, const F& f) {
  if constexpr (host_teams) {
    for_each(
        label, rows, KOKKOS_LAMBDA(long n) {
          for (long j = 0; j < cols; ++j)
            f(n, j);
        });
  } else if (rows * cols <= 0x7fffffffL) {
    // 32-bit division: a GPU divides 64-bit integers in software, slower than the copy itself.
    const int c = int(cols);
    for_each(
        label, rows * cols, KOKKOS_LAMBDA(long e) {
          const int i = int(e);
          f(long(i / c), long(i % c));
        });
  } else {
    for_each(
        label, rows * cols, KOKKOS_LAMBDA(long e) { f(e / cols, e % cols); });
  }
}

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

// Reductions over rows into per-column sums (weight gradients) walk column blocks of this width,
// so that each block reads contiguous memory and owns its outputs.
constexpr int column_block = 64;
inline long column_blocks(long C) { return (C + column_block - 1) / column_block; }
// On a GPU a column block's rows are also cut into chunks of this many, one team each: short
// enough that a 4096-row sum gives the GPU a hundred thousand threads.
constexpr long column_sum_rows = 32;

// At least `floats` of device scratch for column_sums' partial sums: kept between calls (a
// device allocation per call would cost more than the sums) and freed when Kokkos finalizes.
float* column_sum_scratch(std::size_t floats);

// dst[k][i] += the sum over rows n in [0, N) of term(n, i, t)'s t[k], for columns i in [0, C)
// and k < K: weight gradients. On a CPU each column block walks every row once, in order,
// reading contiguous slices, and owns its outputs. On a GPU, where a few dozen blocks would
// leave it idle, a team per (column block, chunk of column_sum_rows rows) with a thread per
// column (neighbours read neighbouring columns) writes the chunk's sums to scratch, and a second
// pass adds the chunks' sums in order: the same bits on every run, so a resumed run stays exact
// (no atomics, whose order varies).
template <int K, class Term>
void column_sums(const char* label, Kokkos::Array<float*, K> dst, long N, long C,
                 const Term& term) {
  if constexpr (host_teams) {
    for_each(
        label, column_blocks(C), KOKKOS_LAMBDA(long blk) {
          const long i0 = blk * column_block, i1 = i0 + column_block < C ? i0 + column_block : C;
          float acc[K][column_block] = {};
          for (long n = 0; n < N; ++n) {
            for (long i = i0; i < i1; ++i) {
              float t[K];
              term(n, i, t);
              for (int k = 0; k < K; ++k)
                acc[k][i - i0] += t[k];
            }
          }
          for (int k = 0; k < K; ++k) {
            for (long i = i0; i < i1; ++i)
              dst[k][i] += acc[k][i - i0];
          }
        });
  } else {
    using Policy = Kokkos::TeamPolicy<Kokkos::DefaultExecutionSpace>;
    const long blocks = column_blocks(C), chunks = (N + column_sum_rows - 1) / column_sum_rows;
    const int team_size = forced_team_size > 0 ? forced_team_size : column_block;
    // partial[(k * chunks + chunk) * C + i]: chunk's sum of term k in column i.
    float* partial = column_sum_scratch(std::size_t(K) * std::size_t(chunks) * std::size_t(C));
    Kokkos::parallel_for(
        label, Policy(int(blocks * chunks), team_size), KOKKOS_LAMBDA(const Team& team) {
          const long blk = team.league_rank() % blocks, chunk = team.league_rank() / blocks;
          const long i0 = blk * column_block, i1 = i0 + column_block < C ? i0 + column_block : C;
          const long n0 = chunk * column_sum_rows,
                     n1 = n0 + column_sum_rows < N ? n0 + column_sum_rows : N;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, i1 - i0), [&](long di) {
            const long i = i0 + di;
            float acc[K] = {};
            for (long n = n0; n < n1; ++n) {
              float t[K];
              term(n, i, t);
              for (int k = 0; k < K; ++k)
                acc[k] += t[k];
            }
            for (int k = 0; k < K; ++k)
              partial[(k * chunks + chunk) * C + i] = acc[k];
          });
        });
    for_each(
        label, K * C, KOKKOS_LAMBDA(long e) {
          const int k = int(e) / int(C), i = int(e) % int(C); // K * C fits in an int
          float sum = 0.0f;
          for (long chunk = 0; chunk < chunks; ++chunk)
            sum += partial[(k * chunks + chunk) * C + i];
          dst[k][i] += sum;
        });
  }
}

} // namespace gridlm::layers
