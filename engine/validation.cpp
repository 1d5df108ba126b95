// Validation samples, read once; the forward-only pass over them.
#include "engine/validation.hpp"

#include <algorithm>

namespace gridlm::engine {

Validation::Validation(const RunData& data, const RunConfig& config, const parallel::Grid& grid,
                       bool reads_tokens)
    : every_(config.train.eval_every), steps_(config.train.steps),
      micro_batches_(config.train.eval_batches), B_(config.train.micro_batch),
      dp_(grid.layout().dp), sample_tokens_(std::size_t(config.model.seq_len) + 1) {
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

bool Validation::due(int step) const {
  return every_ > 0 && ((step + 1) % every_ == 0 || step == steps_ - 1);
}

double Validation::run(parallel::Executor& executor, parallel::Comm& dp) const {
  auto samples = [&](int micro, std::vector<std::int32_t>& seq) {
    const auto from =
        tokens_.begin() + std::ptrdiff_t(std::size_t(micro) * std::size_t(B_) * sample_tokens_);
    std::copy(from, from + std::ptrdiff_t(std::size_t(B_) * sample_tokens_), seq.begin());
  };
  std::vector<double> loss{executor.evaluate(samples)};
  if (dp_ > 1) dp.all_reduce(Span<double>(loss));
  return loss[0] / dp_;
}

} // namespace gridlm::engine
