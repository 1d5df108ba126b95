// Opening a run's token sources, and the batch feed.
#include "engine/data.hpp"

#include <fmt/format.h>

#include "io/synthetic_source.hpp"
#include "io/token_dataset.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

// Collective: the dataset file data.source names, checked against the model; `split` picks the
// training or the validation tokens.
std::unique_ptr<io::TokenDataset> open_dataset(const RunConfig& config, const parallel::Grid& grid,
                                               io::Split split) {
  io::TokenDatasetOptions options;
  options.sample_length = config.model.seq_len + 1;
  options.seed = std::uint64_t(config.data.seed);
  options.split = split;
  auto dataset = std::make_unique<io::TokenDataset>(grid.comm(), config.data.source, options);
  parallel::run_agreed(grid.comm(), [&] {
    if (dataset->vocab_size() > config.model.vocab_size) {
      throw Error(fmt::format("dataset '{}' has a vocabulary of {} tokens but model.vocab_size = "
                              "{}: the model must have a row for every token id; set "
                              "model.vocab_size = {} (or more)",
                              config.data.source, dataset->vocab_size(), config.model.vocab_size,
                              dataset->vocab_size()));
    }
  });
  return dataset;
}

} // namespace

RunData open_data(const RunConfig& config, const parallel::Grid& grid) {
  RunData data;
  if (config.data.source == "synthetic") {
    data.train = std::make_unique<io::SyntheticSource>(config.model.vocab_size,
                                                       std::uint64_t(config.data.seed));
    // The synthetic language from sample 2^40 on: far from any training sample.
    data.valid_base = std::uint64_t(1) << 40;
    return data;
  }
  auto train = open_dataset(config, grid, io::Split::train);
  if (grid.rank() == 0) data.tokenizer = train->tokenizer().model_bytes();
  data.train = std::move(train);
  if (config.train.eval_every > 0) data.valid = open_dataset(config, grid, io::Split::valid);
  return data;
}

BatchFeed::BatchFeed(const io::TokenSource& source, const RunConfig& config,
                     const parallel::Grid& grid, bool needed, int start_step,
                     std::uint64_t samples_seen)
    : source_(source), accum_(config.train.grad_accum), dp_(grid.layout().dp),
      replica_(grid.coords().dp), B_(config.train.micro_batch), length_(config.model.seq_len + 1),
      needed_(needed) {
  restart(start_step, samples_seen);
}

void BatchFeed::stop() {
  if (prefetch_) waited_ += prefetch_->waited();
  prefetch_.reset();
}

void BatchFeed::restart(int start_step, std::uint64_t samples_seen) {
  stop();
  start_step_ = start_step;
  if (!needed_) return;
  const int dp = dp_, replica = replica_, B = B_;
  prefetch_ = std::make_unique<io::Prefetcher>(
      source_,
      [samples_seen, dp, replica, B](long n) {
        return samples_seen + (std::uint64_t(n) * dp + replica) * std::uint64_t(B);
      },
      B, length_, 2 * accum_, accum_);
}

std::vector<std::int32_t> BatchFeed::batch(long n) { return prefetch_->get(n); }

parallel::Executor::Samples BatchFeed::samples(int step) {
  return [this, step](int micro, std::vector<std::int32_t>& seq) {
    seq = prefetch_->get(long(step - start_step_) * accum_ + micro);
  };
}

} // namespace gridlm::engine
