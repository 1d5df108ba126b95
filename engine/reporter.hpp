// engine::Reporter: what a run tells its user. At start-up, from rank 0: the layout, the model,
// the data, the batch, the pipeline and the memory each rank holds (rank 0's, and the largest
// rank's, gathered through parallel::Comm). Each step: one JSON line in output.dir/metrics.jsonl
// (loss, gradient norm, learning rate, tokens/s, ms/step, MFU, communication and data waits,
// bubble), a readable line every train.log_every steps, and the validation loss when there is
// one. Only rank 0 prints or writes; errors are reported by whoever finds them.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint.hpp"
#include "engine/pipeline_model.hpp"
#include "engine/run_config.hpp"
#include "engine/run_plan.hpp"
#include "io/token_source.hpp"
#include "parallel/executor.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

// What one step measured, for the log and the metrics.
struct StepRecord {
  int step = 0;
  double loss = 0.0, grad_norm = 0.0, lr = 0.0;
  double seconds = 0.0;           // wall time of the step
  double comm_seconds = 0.0;      // waiting for stage transfers and tensor-parallel all-reduces
  double dp_in_flight = 0.0;      // data-parallel gradient reduction: first bucket to last done
  double dp_exposed = 0.0;        // of which the step waited for after its ops
  int dp_buckets = 0;             // gradient buckets reduced over dp
  int dp_buckets_overlapped = 0;  // of which started during the backward
  double dp_gather = 0.0;         // ZeRO-1: parameter all-gather in flight (in dp_in_flight)
  double dp_gather_exposed = 0.0; // of which the forward waited for (in dp_exposed)
  double data_wait = 0.0;         // waiting for the batch reader
  bool validated = false;         // a validation ran after this step
  double val_loss = 0.0;          // its loss (a diverged model's NaN is reported as such)
  double tokens_per_s = 0.0;      // the step's throughput, as reported
  parallel::PipelineTiming pipeline;
  std::string checkpoint_path;          // a checkpoint saved after this step ("" for none)
  std::string checkpoint_error;         // why a save after this step failed and was passed over
  double checkpoint_seconds = 0.0;      // and the time it took
  std::uint64_t checkpoint_bytes = 0;   // and its size
  std::uint64_t checkpoint_staging = 0; // and the most host memory a rank staged it in
  std::uint64_t checkpoint_direct = 0;  // and the bytes of it written past the page cache
  bool stop = false;                    // the job is ending: the run stops after this step
  std::string stop_reason;              // why (a signal, the time limit)
  std::string bad;                      // what was wrong with the step ("" when nothing)
  std::string action;                   // what was done: skip, rollback, skip_steps ("" none)
  std::string event;                    // the log's line of it ("" for none)
  std::pair<std::uint64_t, std::uint64_t> samples{0, 0}; // a bad or dropped step's: first, last
  int bad_steps = 0;                                     // bad steps answered so far in this run
  int rollback_to = -1;        // rolled back: the step the run goes on from
  int rolled_back_from = -1;   // the first step after a rollback: the step it left
  std::string rolled_back_for; // and what was wrong with that step, with its samples
};

class Reporter {
public:
  // Writes metrics.jsonl on rank 0 unless `metrics` is false, from open_metrics() on.
  Reporter(const RunConfig& config, const RunPlan& plan, const parallel::Grid& grid,
           bool metrics = true);
  // Rank 0, once the run has passed its checks (a refused run leaves the last run's file as it
  // was): opens the metrics file, ending the job naming it when it cannot be written. A run
  // resumed with `steps` done keeps the lines of steps 1 to `steps` and appends; a new run
  // starts the file afresh.
  void open_metrics(int steps);
  // Collective over the grid: the start-up report. `reduction_bytes`: the gradient buffers of
  // the data-parallel reduction besides the model's (ZeRO-1's reduced shard), counted as
  // gradients. Returns the largest rank's total bytes (every rank).
  double startup(const PipelineModel& model, const io::TokenSource& data,
                 std::size_t optimizer_bytes, std::size_t reduction_bytes);
  // The step's metrics line and readable lines. Returns the step's tokens/s (NaN for a step
  // train.skip_steps dropped).
  double step(const StepRecord& r);
  // "resumed from PATH at step N" (rank 0).
  void resumed(const std::string& path, const CheckpointMeta& meta, double seconds);
  // A rollback (train.on_nonfinite): the line of it (rank 0); drops the metrics lines of the
  // steps after `steps`, which are run again. `bad_step` (from 0) was `why`; the run went back
  // to `path`, `steps` done, and goes on with the samples from `samples_seen`.
  void rolled_back(int bad_step, const std::string& why, const std::string& path, int steps,
                   std::uint64_t samples_seen);
  // "name: path" once a file is written (rank 0).
  void wrote(const char* what, const std::string& path) const;
  // One line of the log (rank 0; nothing for "").
  void note(const std::string& line) const;

private:
  // The step's line of metrics.jsonl.
  nlohmann::json metrics_record(const StepRecord& r, double rate, double mfu) const;
  // Rank 0: rewrites the metrics file with its lines of steps 1 to `steps` only (a new file
  // renamed over the old, so that a crash meanwhile loses no line), and appends from there.
  void keep_metrics_until(int steps);

  const RunConfig& config_;
  const RunPlan& plan_;
  const parallel::Grid& grid_;
  double flops_per_step_ = 0.0, tokens_per_step_ = 0.0;
  bool metrics_wanted_ = false; // rank 0, output.metrics set, not a dry run
  std::ofstream metrics_;
};

} // namespace gridlm::engine
