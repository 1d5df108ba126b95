// Validation samples, read once; the forward-only pass over them.
#include "engine/validation.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gridlm::engine {

std::string validation_memory_problem(const TrainConfig& t, int seq_len) {
  const double mib =
      double(t.eval_batches) * t.grad_accum * t.micro_batch * (double(seq_len) + 1) * 4 / (1 << 20);
  if (t.eval_every == 0 || mib <= 1024) return "";
  return fmt::format("a validation of train.eval_batches = {} global batches keeps {:.0f} MiB of "
                     "tokens on each replica (eval_batches x grad_accum x micro_batch x (seq_len "
                     "+ 1) x 4 bytes), more than 1024 MiB: lower train.eval_batches",
                     t.eval_batches, mib);
}

Validation::Validation(const RunData& data, const RunConfig& config, const parallel::Grid& grid,
                       bool reads_tokens)
    : every_(config.train.eval_every), steps_(config.train.steps),
      micro_batches_(config.train.eval_batches * config.train.grad_accum),
      B_(config.train.micro_batch), dp_(grid.layout().dp),
      sample_tokens_(std::size_t(config.model.seq_len) + 1) {
  if (every_ <= 0 || !reads_tokens) return;
  const int replica = grid.coords().dp, T = config.model.seq_len;
  tokens_.resize(std::size_t(micro_batches_) * std::size_t(B_) * sample_tokens_);
  for (int micro = 0; micro < micro_batches_; ++micro) {
    const std::uint64_t at =
        data.valid_base + (std::uint64_t(micro) * dp_ + replica) * std::uint64_t(B_);
    for (int b = 0; b < B_; ++b) {
      data.validation().sample(
          tokens_.data() + (std::size_t(micro) * std::size_t(B_) + std::size_t(b)) * sample_tokens_,
          at + std::uint64_t(b), T + 1);
    }
  }
}

std::string validation_shortfall(const RunData& data, const RunConfig& config,
                                 const parallel::Grid& grid) {
  if (config.train.eval_every <= 0 || !data.valid) return "";
  const auto extent = data.valid->extent();
  const auto batch = std::uint64_t(global_batch(config.train, grid.layout().dp));
  const std::uint64_t need = std::uint64_t(config.train.eval_batches) * batch;
  if (!extent || need <= extent->samples) return "";
  const std::uint64_t reads =
      (need + extent->samples - 1) / std::max<std::uint64_t>(1, extent->samples);
  const std::string what = fmt::format(
      "a validation reads {} samples (train.eval_batches = {} x the global batch of {}), but "
      "the validation split of '{}' holds {}: the other {} are its samples again (its next "
      "epochs), each read up to {} times in one loss",
      need, config.train.eval_batches, batch, config.data.source, extent->samples,
      need - extent->samples, reads);
  if (extent->samples < batch) {
    return what + "; remake the dataset with a larger --valid-fraction, or set "
                  "train.eval_every = 0";
  }
  return what + fmt::format("; set train.eval_batches = {} to read each once, or remake the "
                            "dataset with a larger --valid-fraction",
                            extent->samples / batch);
}

bool Validation::due(int step) const {
  return every_ > 0 && ((step + 1) % every_ == 0 || step == steps_ - 1);
}

double Validation::run(parallel::Executor& executor, parallel::Comm& dp) const {
  auto samples = [&](int micro, std::vector<std::int32_t>& seq) {
    const auto from =
        tokens_.begin() + std::ptrdiff_t(std::size_t(micro) * std::size_t(B_) * sample_tokens_);
    std::copy(from, from + std::ptrdiff_t(std::size_t(B_) * sample_tokens_), seq.begin());
  };
  // Forward-only steps of the plan's validation micro-batches (a divisor of grad_accum), as
  // many as the global batches take; every step the same size, so their mean is the mean.
  const int each = executor.plan().eval.micro_batches, steps = micro_batches_ / each;
  std::vector<double> loss{0.0};
  for (int s = 0; s < steps; ++s) {
    loss[0] += executor.evaluate(
        [&](int micro, std::vector<std::int32_t>& seq) { samples(s * each + micro, seq); });
  }
  if (dp_ > 1) dp.all_reduce(Span<double>(loss));
  return loss[0] / (double(dp_) * steps);
}

} // namespace gridlm::engine
