// engine::Checkpointer: when a run saves checkpoints and what happens around a save. Enabled by
// checkpoint.dir: a save after every checkpoint.every steps, when checkpoint.every_minutes have
// passed since the last (rank 0's clock, agreed), and always after the last step. A save writes
// step-NNNNNN.h5 collectively (engine/checkpoint), then rank 0 replaces `latest` (written
// aside, synced and renamed) and removes all but the newest checkpoint.keep complete checkpoints
// up to the one it wrote; a crash at any moment leaves the previous checkpoint and `latest`
// intact.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint.hpp"
#include "engine/run_config.hpp"
#include "engine/run_plan.hpp"

namespace gridlm::engine {

// Of the file names in a checkpoint directory, the checkpoints (step-N.h5) to remove after
// step `published` was saved: all but the newest `keep` (at least 1) of those up to
// `published`, by step number. Checkpoints of later steps (a run resumed from an earlier one)
// are left alone, so the one just published is never among them.
std::vector<std::string> checkpoints_to_prune(const std::vector<std::string>& names, long published,
                                              int keep);

class Checkpointer {
public:
  Checkpointer(const RunConfig& config, const RunPlan& plan, const parallel::Grid& grid);
  bool enabled() const { return !dir_.empty(); }
  // Collective: whether to save after step `step` (0-based) is done.
  bool due(int step);

  struct Saved {
    std::string path;
    double seconds = 0.0;
    std::uint64_t bytes = 0;
    std::uint64_t staging = 0; // the most host memory one rank copied its shard into
    std::uint64_t direct = 0;  // bytes written with O_DIRECT, all ranks together
  };
  // Collective over the grid. `meta.step` is the number of steps done.
  Saved save(const CheckpointMeta& meta, const PipelineModel& model, const OptimizerStep& optimizer,
             const std::string& tokenizer);

  // Rank 0 removes what a failed save of step `step` left (its .partial file).
  void discard(int step);

private:
  const RunConfig& config_;
  const parallel::Grid& grid_;
  std::string dir_;
  std::chrono::steady_clock::time_point last_;
};

} // namespace gridlm::engine
