// LayerNorm kernels.
#include "layers/layernorm.hpp"

#include <cmath>

#include "layers/kernels.hpp"

namespace gridlm::layers {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, long N, int C) {
  for_each_row(
      "layers::LayerNorm::forward", N, KOKKOS_LAMBDA(const Team& team) {
        const long n = team.league_rank();
        const float* x = inp + n * C;
        const float m = team_sum(team, C, [&](long i) { return x[i]; }) / C;
        const float v = team_sum(team, C,
                                 [&](long i) {
                                   const float d = x[i] - m;
                                   return d * d;
                                 }) /
                        C;
        const float s = 1.0f / std::sqrt(v + 1e-5f);
        float* o = out + n * C;
        team_for(team, C, [&](long i) { o[i] = (x[i] - m) * s * w[i] + b[i]; });
        Kokkos::single(Kokkos::PerTeam(team), [&] {
          mean[n] = m;
          rstd[n] = s;
        });
      });
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, long N, int C) {
  for_each_row(
      "layers::LayerNorm::backward_input", N, KOKKOS_LAMBDA(const Team& team) {
        const long n = team.league_rank();
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        const float m = mean[n], s = rstd[n];
        // Two reductions: mean of dnorm and mean of dnorm * norm.
        float dnorm_mean, dnorm_norm_mean;
        team_sums(
            team, C,
            [&](long i, float& dnorm, float& dnorm_norm) {
              dnorm = w[i] * dy[i];
              dnorm_norm = dnorm * ((x[i] - m) * s);
            },
            dnorm_mean, dnorm_norm_mean);
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float* dx = dinp + n * C;
        team_for(team, C, [&](long i) {
          const float norm = (x[i] - m) * s;
          const float dnorm = w[i] * dy[i];
          dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        });
      });
  column_sums<2>(
      "layers::LayerNorm::backward_weight", {dw, db}, N, C,
      KOKKOS_LAMBDA(long n, long i, float(&t)[2]) {
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        t[0] = (x[i] - mean[n]) * rstd[n] * dy[i];
        t[1] = dy[i];
      });
}

} // namespace gridlm::layers
