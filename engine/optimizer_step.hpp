// engine::OptimizerStep: the update at the end of a step — the global gradient norm (each
// tensor once over pp and tp), the learning rate of the schedule, and AdamW on every chunk with
// clipping. It owns the optimizer state; ZeRO-1 makes it a shard of it.
#pragma once

#include <memory>
#include <vector>

#include "engine/pipeline_model.hpp"
#include "layers/adamw.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {

class OptimizerStep {
public:
  // `optim` with decay_steps resolved (RunPlan::optim).
  OptimizerStep(const layers::OptimizerConfig& optim, const PipelineModel& model);

  struct Result {
    double grad_norm = 0.0; // before clipping
    double lr = 0.0;
  };
  // Collective over pp and tp. Recorded in `trace` (may be null) as the optimizer.
  Result apply(PipelineModel& model, int step, parallel::TraceRecorder* trace);
  std::size_t state_bytes() const;
  // Chunk c's optimizer (its moments, for checkpoints).
  layers::AdamW& adamw(std::size_t c) const { return *adamw_[c]; }

private:
  layers::OptimizerConfig optim_;
  std::vector<std::unique_ptr<layers::AdamW>> adamw_; // one per chunk
};

} // namespace gridlm::engine
