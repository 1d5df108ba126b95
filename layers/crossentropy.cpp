// Fused softmax cross-entropy kernels, vocabulary-parallel.
#include "layers/crossentropy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "layers/fast_math.hpp"
#include "layers/kernels.hpp"
#include "parallel/comm.hpp"

namespace gridlm::layers {
namespace {

// Real columns of this rank's slice, [0, valid): forward and backward leave the padding out alike
// (a target there has no logit in either).
long real_columns(const VocabSlice& slice) {
  return std::clamp(slice.vocab_size - slice.begin, 0L, slice.local);
}

} // namespace

double crossentropy_forward(float* logits_to_exps, float* losses, float* scratch,
                            const std::int32_t* targets, long N, const VocabSlice& slice) {
  const long V = slice.local, v0 = slice.begin, valid = real_columns(slice);
  float* mx = scratch;        // [N] row maximum over the group
  float* sum_t = scratch + N; // [2N] sum of exponentials, target logit
  for_each_row(
      "layers::CrossEntropy::local_max", N, KOKKOS_LAMBDA(const Team& team) {
        const long n = team.league_rank();
        const float m = team_max(team, logits_to_exps + n * V, valid, -3.0e38f);
        Kokkos::single(Kokkos::PerTeam(team), [&] { mx[n] = m; });
      });
  const bool grouped = slice.group != nullptr && slice.group->size() > 1;
  // The kernels must be done before an MPI group reads their output (GPT::tp_sum says why);
  // then the all-reduce is timed as the model's other tensor-parallel ones are: the first
  // place the ranks wait for each other after the head's product.
  const auto all_reduce = [&](Span<float> data, parallel::ReduceOp op) {
    Kokkos::DefaultExecutionSpace().fence();
    const auto t0 = std::chrono::steady_clock::now();
    slice.group->all_reduce(data, op);
    if (slice.comm_seconds != nullptr) {
      *slice.comm_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  if (grouped) all_reduce(Span<float>(mx, std::size_t(N)), parallel::ReduceOp::max);
  for_each_row(
      "layers::CrossEntropy::local_sum", N, KOKKOS_LAMBDA(const Team& team) {
        const long n = team.league_rank();
        float* p = logits_to_exps + n * V;
        const float m = mx[n];
        const long target = long(targets[n]) - v0;
        // Read before the loop below turns the logits into exponentials.
        const float target_logit = target >= 0 && target < valid ? p[target] : 0.0f;
        team.team_barrier();
        const float s = team_sum(team, valid, [&](long j) { return p[j] = fast_exp(p[j] - m); });
        team_for(team, V - valid, [&](long j) { p[valid + j] = 0.0f; });
        Kokkos::single(Kokkos::PerTeam(team), [&] {
          sum_t[n] = s;
          sum_t[N + n] = target_logit;
        });
      });
  if (grouped) all_reduce(Span<float>(sum_t, std::size_t(2 * N)), parallel::ReduceOp::sum);
  // log-sum-exp form: exact even when the target's probability underflows. The exponentials
  // stay unnormalised: the backward scales them, one pass over the logits instead of two.
  for_each(
      "layers::CrossEntropy::losses", N,
      KOKKOS_LAMBDA(long n) { losses[n] = std::log(sum_t[n]) - (sum_t[N + n] - mx[n]); });
  double total = 0.0;
  Kokkos::parallel_reduce(
      "layers::CrossEntropy::mean", Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, long>(0, N),
      KOKKOS_LAMBDA(long n, double& acc) { acc += losses[n]; }, total);
  return total / double(N);
}

void crossentropy_backward(float* exps_to_dlogits, const float* scratch,
                           const std::int32_t* targets, float dloss, long N,
                           const VocabSlice& slice, Precision precision) {
  const long V = slice.local, v0 = slice.begin, valid = real_columns(slice);
  const float* sum = scratch + N; // the forward's row sums of exponentials
  const bool bf16 = precision == Precision::bf16;
  for_each_row(
      "layers::CrossEntropy::backward", N, KOKKOS_LAMBDA(const Team& team) {
        const long n = team.league_rank();
        float* p = exps_to_dlogits + n * V;
        const long target = long(targets[n]) - v0;
        const bool mine = target >= 0 && target < valid;
        const float inv = 1.0f / sum[n];
        // (probability - onehot) * dloss, the probability rounded to a float first, as a
        // normalised copy held it; padding columns hold 0 and stay 0. The target's term is
        // taken from the stored product, as two separate roundings (no fused multiply-add).
        team_for(team, V, [&](long j) {
          const float d = p[j] * inv * dloss;
          p[j] = bf16 && !(mine && j == target) ? round_to_bf16(d) : d;
        });
        team.team_barrier();
        if (mine) {
          Kokkos::single(Kokkos::PerTeam(team), [&] {
            const float d = p[target] - dloss;
            p[target] = bf16 ? round_to_bf16(d) : d;
          });
        }
      });
}

double crossentropy_forward(float* logits_to_exps, float* losses, float* scratch,
                            const std::int32_t* targets, long N, int V) {
  return crossentropy_forward(logits_to_exps, losses, scratch, targets, N,
                              VocabSlice{0, V, V, nullptr});
}

void crossentropy_backward(float* exps_to_dlogits, const float* scratch,
                           const std::int32_t* targets, float dloss, long N, int V) {
  crossentropy_backward(exps_to_dlogits, scratch, targets, dloss, N, VocabSlice{0, V, V, nullptr});
}

} // namespace gridlm::layers
