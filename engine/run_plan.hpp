// engine::RunPlan: every decision about a training run that does not change from step to step,
// taken once, before anything is allocated, and agreed by every rank — which backend carries
// the model's collectives and the stage transfers, the pipeline plan (schedule, validation
// schedule, transfers, slots), the blocks of each virtual stage, the optimizer's resolved
// schedule and the output paths. Everything after reads the plan instead of deciding again.
#pragma once

#include <string>
#include <vector>

#include "engine/run_config.hpp"
#include "parallel/grid.hpp"
#include "parallel/pipeline_plan.hpp"

namespace gridlm::engine {

struct RunPlan {
  std::string backend = "mpi";          // the model's collectives (tp, dp): mpi or nccl
  std::string transfer_backend = "mpi"; // stage-to-stage transfers: mpi or nccl
  parallel::PipelinePlan pipeline;      // schedule, validation schedule, transfers, slots
  std::vector<int> stage_blocks;        // blocks per virtual stage (pp x chunks of them)
  layers::OptimizerConfig optim;        // train's, with decay_steps resolved
  bool reference_dump = false;          // output.reference_dump is set (one rank only)
  std::string metrics_path;             // output.dir/output.metrics, or "" for none
  std::string weights_path;             // output.dir/output.weights, or "" for none
  std::string trace_path;               // the trace file, or "" for none
  std::string gradients_path;           // the first step's gradients file, or "" for none
  std::string checkpoint_dir;           // output.dir/checkpoint.dir (exists, writable), or ""
  std::string resume_path;              // the checkpoint to go on from, or "" (a fresh start)
  std::string init_from;                // weights to start from, or ""
};

// Collective over the grid. Throws the same CollectiveError on every rank for a schedule, stage
// layout or backend that cannot work, naming the key and the fix. Rank 0 creates output.dir.
RunPlan plan_run(const RunConfig& config, const parallel::Grid& grid);

// The checkpoint file of a step in `dir`, and the file naming the newest complete one.
std::string checkpoint_file(const std::string& dir, int step);
std::string latest_file(const std::string& dir);

// Collective over the grid: whether rank 0 finds no file at `path` ("" is never missing).
bool missing_on_root(const std::string& path, const parallel::Grid& grid);

// A path inside output.dir: "" stays "" (none), an absolute path stays as it is, and with no
// output.dir a name is relative to the working directory.
std::string output_path(const RunConfig& config, const std::string& name);

} // namespace gridlm::engine
