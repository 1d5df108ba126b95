// Where a run's tokens come from, and how a step gets them. open_data() opens the training
// source (the synthetic language or a dataset file's training split) and the validation source
// (the dataset's validation split, or synthetic samples far from any training sample), checked
// against the model. BatchFeed hands the executor each step's micro-batches, read ahead on a
// background thread (io::Prefetcher) on the ranks whose stages take tokens.
//
// Samples are numbered globally: replica r of R at step s, micro-batch m reads samples
// ((s x accum + m) x R + r) x B ..., so the union of a step's samples does not depend on R.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/run_config.hpp"
#include "io/prefetcher.hpp"
#include "io/token_source.hpp"
#include "parallel/executor.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

struct RunData {
  std::unique_ptr<io::TokenSource> train;
  std::unique_ptr<io::TokenSource> valid; // null: held-out samples of `train`
  std::uint64_t valid_base = 0;           // first validation sample of validation()
  std::string tokenizer; // rank 0: the dataset's serialized tokenizer ("" for synthetic)
  const io::TokenSource& validation() const { return valid ? *valid : *train; }
};

// Collective over the grid. Throws the same CollectiveError on every rank for a dataset file
// that is bad or whose vocabulary the model does not cover.
RunData open_data(const RunConfig& config, const parallel::Grid& grid);

class BatchFeed {
public:
  // Starts the read-ahead thread when `needed` (this rank's stages take tokens), for steps from
  // `start_step` on, whose first sample is `samples_seen` (the data cursor of a resumed run).
  // HDF5 is not thread-safe: call stop() before any file is written, restart() after.
  BatchFeed(const io::TokenSource& source, const RunConfig& config, const parallel::Grid& grid,
            bool needed, int start_step = 0, std::uint64_t samples_seen = 0);
  // The executor's samples of one step.
  parallel::Executor::Samples samples(int step);
  // Batch n = (step - start_step) x accum + micro ([B, T+1] tokens).
  std::vector<std::int32_t> batch(long n);
  // Seconds spent waiting for batches so far.
  double waited() const { return waited_ + (prefetch_ ? prefetch_->waited() : 0.0); }
  void stop();
  void restart(int start_step, std::uint64_t samples_seen);

private:
  const io::TokenSource& source_;
  int accum_ = 1, dp_ = 1, replica_ = 0, B_ = 1, length_ = 2;
  bool needed_ = false;
  int start_step_ = 0;
  double waited_ = 0.0; // by earlier prefetchers
  std::unique_ptr<io::Prefetcher> prefetch_;
};

} // namespace gridlm::engine
