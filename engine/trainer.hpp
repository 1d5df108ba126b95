// engine::train: a training run over a built grid. It plans the run (engine/run_plan), opens
// the data (engine/data), builds this rank's share of the model (engine/pipeline_model), and
// runs the step loop: the pipeline's forwards and backwards (parallel::Executor), gradient
// synchronisation over dp (engine/grad_sync), the optimizer (engine/optimizer_step),
// validation (engine/validation), the log and metrics (engine/reporter); at the end the weights
// file (engine/weights_file) and the reference dump (engine/reference_dump).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/run_config.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

// Result of a run, for tests and the caller's summary.
struct TrainResult {
  double first_loss = 0.0;
  double last_loss = 0.0;
  double tokens_per_s = 0.0;      // median over logged steps after the first
  std::vector<double> losses;     // every step's loss (mean over micro-batches and replicas)
  std::vector<double> grad_norms; // every step's global gradient norm, before clipping
  int dp_buckets = 0;             // data-parallel gradient buckets per step (this rank)
  int dp_buckets_overlapped = 0;  // of which started during the backward, over all steps
  std::vector<std::pair<int, double>> val_losses; // (step, validation loss) when evaluated
  int steps_done = 0;           // optimizer steps done, counting those of the run it resumed
  std::string stopped;          // why the run stopped before train.steps ("" when it did not)
  std::string checkpoint;       // the checkpoint it saved then ("" when checkpoint.dir is not set)
  double memory_per_rank = 0.0; // bytes: the start-up report's total on the largest rank
};

// Collective over the grid: everything a run checks before its first step, in seconds and
// without training (gridlm train --dry-run): the layout and schedule, the data file and its
// vocabulary, checkpoint.dir (created and writable), the header of the checkpoint that --resume
// or --init-from starts from (format, model shape, moments, data), the job's time limit, and the
// memory per rank: the model, gradients and optimizer state are allocated as the run would
// (the start-up report shows them), so a layout that does not fit fails here. Throws the same
// CollectiveError on every rank for what is wrong.
void check_run(const RunConfig& config, const parallel::Grid& grid);

// Collective over the grid. The configuration must be validated; `config_text` (its TOML, for
// the record) goes into checkpoints. A resumed run's result holds the steps it ran.
TrainResult train(const RunConfig& config, const parallel::Grid& grid,
                  const std::string& config_text = "");

} // namespace gridlm::engine
