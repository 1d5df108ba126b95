// AdamW, clipping and the learning-rate schedule.
#include "layers/adamw.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "layers/kernels.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::layers {

OptimizerConfig resolve_decay(OptimizerConfig c, int steps) {
  if (c.decay_steps == 0) c.decay_steps = steps;
  return c;
}

double learning_rate(const OptimizerConfig& c, int step) {
  if (c.decay_steps <= 0) {
    throw Error(fmt::format("train.decay_steps = {}: the decay must end at a positive step (0 "
                            "means train.steps, resolved once by the run setup)",
                            c.decay_steps));
  }
  if (c.warmup_steps > 0 && step < c.warmup_steps) {
    return c.lr * double(step + 1) / double(c.warmup_steps);
  }
  if (step >= c.decay_steps) return c.min_lr;
  const double span = double(std::max(1, c.decay_steps - c.warmup_steps));
  const double progress = double(step - c.warmup_steps) / span;
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(M_PI * progress));
}

std::string schedule_note(const OptimizerConfig& c, int steps) {
  if (c.warmup_steps <= c.decay_steps) return "";
  // The warmup goes on past the decay's end (learning_rate tests it first), then min_lr.
  const int top = std::min(c.warmup_steps, steps);
  const std::string after = c.warmup_steps < steps ? ", then drops to train.min_lr" : "";
  return fmt::format("the learning rate warms up for {} steps (train.warmup_steps), past the "
                     "decay's end at step {} (train.decay_steps, or train.steps when 0), so "
                     "there is no cosine decay: it rises to {:.3g} of train.lr by step {}{}; set "
                     "train.warmup_steps below {} for the warmup and decay",
                     c.warmup_steps, c.decay_steps, double(top) / double(c.warmup_steps), top,
                     after, c.decay_steps);
}

AdamW::AdamW(const OptimizerConfig& config, const ParamTable& table)
    : AdamW(config, table, {AdamWSegment{0, 0, table.total}}, table.total) {}

AdamW::AdamW(const OptimizerConfig& config, const ParamTable& table,
             const std::vector<AdamWSegment>& segments, std::size_t state_size)
    : config_(config), segments_(segments) {
  moment1_ = Kokkos::View<float*>("layers::AdamW::m", state_size);
  moment2_ = Kokkos::View<float*>("layers::AdamW::v", state_size);
  decays_ = Kokkos::View<std::uint8_t*>("layers::AdamW::decays", state_size);
  // Straight into the state's mirror, tensor by tensor where it meets a segment: an array of
  // the whole table (a ZeRO shard's state holds 1/dp of it) would be the run's peak of memory.
  auto host = Kokkos::create_mirror_view(decays_);
  for (const ParamInfo& p : table.params) {
    bool decays = p.kind == ParamKind::weight;
    if (p.kind == ParamKind::embedding) decays = config.decay_embeddings;
    if (p.kind == ParamKind::norm || p.kind == ParamKind::bias) {
      decays = config.decay_norms_and_biases;
    }
    const std::uint8_t decay = decays ? 1 : 0;
    for (const AdamWSegment& s : segments_) {
      const std::size_t begin = std::max(p.offset, s.param),
                        end = std::min(p.offset + p.size, s.param + s.size);
      for (std::size_t i = begin; i < end; ++i)
        host(s.state + (i - s.param)) = decay;
    }
  }
  Kokkos::deep_copy(decays_, host);
}

void AdamW::update(Kokkos::View<float*> params, Kokkos::View<const float*> grads, int updates_done,
                   double lr, double grad_norm) {
  const float clip = config_.grad_clip > 0.0 && grad_norm > config_.grad_clip
                         ? float(config_.grad_clip / (grad_norm + 1e-6))
                         : 1.0f;
  const float b1 = float(config_.beta1), b2 = float(config_.beta2), eps = float(config_.eps);
  const float bc1 = float(1.0 - std::pow(config_.beta1, updates_done + 1));
  const float bc2 = float(1.0 - std::pow(config_.beta2, updates_done + 1));
  const float flr = float(lr), decay = float(config_.weight_decay);
  for (const AdamWSegment& s : segments_) {
    float* p = params.data() + s.param;
    const float* g = grads.data() + s.state;
    float* m = moment1_.data() + s.state;
    float* v = moment2_.data() + s.state;
    const std::uint8_t* decays = decays_.data() + s.state;
    for_each(
        "layers::AdamW::update", long(s.size), KOKKOS_LAMBDA(long i) {
          const float gi = g[i] * clip;
          m[i] = b1 * m[i] + (1.0f - b1) * gi;
          v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
          const float mhat = m[i] / bc1, vhat = v[i] / bc2;
          const float wd = decays[i] != 0 ? decay : 0.0f;
          p[i] -= flr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
        });
  }
}

double sum_of_squares(Kokkos::View<const float*> data) {
  // Chunks of 1024 summed in 16 independent float lanes (which the compiler vectorises without
  // reassociating anything), chunk totals accumulated in double.
  constexpr long chunk = 1024, lanes = 16;
  const long n = long(data.size());
  const float* d = data.data();
  double total = 0.0;
  Kokkos::parallel_reduce(
      "layers::sum_of_squares",
      Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, long>(0, (n + chunk - 1) / chunk),
      KOKKOS_LAMBDA(long c, double& acc) {
        const long begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
        float lane[lanes] = {};
        long i = begin;
        for (; i + lanes <= end; i += lanes) {
          for (long j = 0; j < lanes; ++j)
            lane[j] += d[i + j] * d[i + j];
        }
        double part = 0.0;
        for (; i < end; ++i)
          part += double(d[i]) * double(d[i]);
        for (long j = 0; j < lanes; ++j)
          part += double(lane[j]);
        acc += part;
      },
      total);
  return total;
}

double sum_of_squares(const float* data, Kokkos::View<const long*> ranges) {
  using Policy = Kokkos::TeamPolicy<Kokkos::DefaultExecutionSpace>;
  const long n = long(ranges.size()) / 2;
  double total = 0.0;
  Kokkos::parallel_reduce(
      "layers::sum_of_squares_ranges", Policy(int(n), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Policy::member_type& team, double& acc) {
        const long r = team.league_rank(), begin = ranges[2 * r];
        float sum = 0.0f;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, ranges[2 * r + 1] - begin),
            [&](long i, float& part) { part += data[begin + i] * data[begin + i]; }, sum);
        Kokkos::single(Kokkos::PerTeam(team), [&] { acc += double(sum); });
      },
      total);
  return total;
}

} // namespace gridlm::layers
