// engine::OptimizerStep: the update at the end of a step — the global gradient norm (each
// tensor once over pp and tp), the learning rate of the schedule, and AdamW on every chunk with
// clipping. It owns the optimizer state: all of it, or under ZeRO-1 this replica's shard (the
// parts of each chunk's buffer it owns, engine/dp_shards), updated from the reduce-scattered
// gradients; GradSync then all-gathers the parameters.
#pragma once

#include <memory>
#include <vector>

#include "engine/grad_sync.hpp"
#include "engine/pipeline_model.hpp"
#include "layers/adamw.hpp"
#include "parallel/grid.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {

class OptimizerStep {
public:
  // `optim` with decay_steps resolved (RunPlan::optim). `sync` gives the ZeRO-1 shard plan
  // and gradients when sync.zero(); both must outlive this.
  OptimizerStep(const layers::OptimizerConfig& optim, const PipelineModel& model, GradSync& sync,
                const parallel::Grid& grid);

  // Collective over pp and tp (over the grid under ZeRO): the global gradient norm, before
  // clipping. The trainer decides from it (engine/step_guard) whether to update().
  double grad_norm(const PipelineModel& model) const;
  // AdamW at learning rate `lr` (the schedule's at the step) with clipping to `grad_norm`;
  // one more update counted. Recorded in `trace` (may be null) as the optimizer.
  void update(PipelineModel& model, double lr, double grad_norm, parallel::TraceRecorder* trace);
  // Updates applied since the moments began (the steps less those skipped), which AdamW's bias
  // correction counts; checkpoints keep it.
  int updates() const { return updates_; }
  void set_updates(int updates) { updates_ = updates; }
  // Test-only (GRIDLM_FAULT=nan_grad): a NaN in one gradient element that counts in the norm,
  // in the gradients update() would read.
  void poison_gradient(PipelineModel& model);
  // Whether this rank holds a ZeRO-1 shard of the state, not all of it.
  bool sharded() const { return sync_.zero(); }
  // Bytes of optimizer state this rank holds.
  std::size_t state_bytes() const;
  // Chunk c's moment (1: m, 2: v) in the chunk's flat layout, for checkpoints: the moment
  // itself, or under ZeRO a copy, gathered over dp (collective over dp) when `gathered`, else
  // a buffer to read a whole moment into for load_moment().
  Kokkos::View<float*> moment(std::size_t c, int which, bool gathered = true) const;
  // Sets it from the chunk's flat layout in host memory (each replica keeps its owned parts).
  using HostTable = Kokkos::View<float*>::HostMirror;
  void load_moment(std::size_t c, int which, const HostTable& table);

private:
  // Under ZeRO: this rank's share of the squared global norm, over the parts it owns.
  double owned_sum_of_squares(const PipelineModel& model) const;

  layers::OptimizerConfig optim_;
  GradSync& sync_;
  const parallel::Grid& grid_;
  std::vector<std::unique_ptr<layers::AdamW>> adamw_; // one per chunk
  std::vector<std::size_t> table_sizes_;              // per chunk: its flat buffer's elements
  int updates_ = 0;                                   // updates applied to the moments
};

} // namespace gridlm::engine
