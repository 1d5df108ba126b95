// Fused softmax cross-entropy kernels.
#include "layers/crossentropy.hpp"

#include <cmath>

#include "layers/fast_math.hpp"
#include "layers/kernels.hpp"

namespace gridlm::layers {

double crossentropy_forward(float* logits_to_probs, float* losses, const std::int32_t* targets,
                            long N, int V) {
  for_each(
      "layers::CrossEntropy::forward", N, KOKKOS_LAMBDA(long n) {
        float* p = logits_to_probs + n * V;
        const float target_logit = p[targets[n]];
        float mx = p[0];
        for (int j = 1; j < V; ++j)
          mx = p[j] > mx ? p[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < V; ++j) {
          p[j] = fast_exp(p[j] - mx);
          sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < V; ++j)
          p[j] *= inv;
        // log-sum-exp form: exact even when the target's probability underflows.
        losses[n] = std::log(sum) - (target_logit - mx);
      });
  double total = 0.0;
  Kokkos::parallel_reduce(
      "layers::CrossEntropy::mean", Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, long>(0, N),
      KOKKOS_LAMBDA(long n, double& acc) { acc += losses[n]; }, total);
  return total / double(N);
}

void crossentropy_backward(float* probs_to_dlogits, const std::int32_t* targets, float dloss,
                           long N, int V) {
  for_each(
      "layers::CrossEntropy::backward", N, KOKKOS_LAMBDA(long n) {
        float* p = probs_to_dlogits + n * V;
        for (int j = 0; j < V; ++j)
          p[j] *= dloss;
        p[targets[n]] -= dloss;
      });
}

} // namespace gridlm::layers
