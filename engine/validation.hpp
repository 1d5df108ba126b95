// The validation loss (train.eval_every): the same held-out samples every time — the dataset's
// validation split, or synthetic samples far from any training sample — split over the
// data-parallel replicas, run forward only through the pipeline, the loss averaged. It reads
// train.eval_batches global batches (the split's first eval_batches x micro_batch x grad_accum
// x dp samples), so a layout of the same global batch reads the same samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data.hpp"
#include "engine/run_config.hpp"
#include "parallel/comm.hpp"
#include "parallel/executor.hpp"

namespace gridlm::engine {

// A note for the start-up report when one validation reads more samples than the dataset's
// validation split holds: the rest wrap into the split's next epoch, so some are read twice.
// "" when they fit (or no validation runs, or its samples are synthetic).
std::string validation_shortfall(const RunData& data, const RunConfig& config,
                                 const parallel::Grid& grid);

class Validation {
public:
  // Reads this replica's samples once, now: they are few, and the prefetch thread must be the
  // only reader of the file once it runs. `reads_tokens`: this rank's stages take tokens.
  Validation(const RunData& data, const RunConfig& config, const parallel::Grid& grid,
             bool reads_tokens);
  // Whether a validation follows step `step` (every eval_every steps, and after the last).
  bool due(int step) const;
  // Collective over the grid: the mean loss of the validation samples. `dp` holds host
  // scalars of the data-parallel replicas.
  double run(parallel::Executor& executor, parallel::Comm& dp) const;

private:
  int every_ = 0, steps_ = 0;
  int micro_batches_ = 0; // this replica's: train.eval_batches x grad_accum
  int B_ = 0, dp_ = 1;
  std::size_t sample_tokens_ = 0;
  std::vector<std::int32_t> tokens_; // [micro_batches, B, T+1]
};

} // namespace gridlm::engine
