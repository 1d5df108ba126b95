// The pipeline executor: runs this rank's op list of a schedule over the model chunks it holds,
// with non-blocking point-to-point transfers of activations (forward) and their gradients
// (backward) over the pp axis, all receives posted at the start of the step. Each chunk is a
// GPT stage (uniform blocks per virtual stage; embedding on the first, head on the last) with
// as many activation slots as the schedule keeps micro-batches in flight on this rank.
// Lives in app/ because it joins parallel (schedules, communicators) and layers (the model).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "layers/adamw.hpp"
#include "layers/gpt.hpp"
#include "parallel/grid.hpp"
#include "parallel/schedule.hpp"

namespace gridlm::app {

class Pipeline {
public:
  // Collective over the grid. Throws gridlm::Error (the same on every rank) when the blocks do
  // not divide among pp x chunks virtual stages.
  // `pp` carries the activations and gradients between stages (MPI when null).
  Pipeline(const layers::ModelConfig& model, int B, int T, const parallel::Grid& grid,
           const parallel::Schedule& schedule, parallel::Comm* tp,
           std::unique_ptr<parallel::Comm> pp = nullptr);

  // Fills tokens [B, T+1] for micro-batch `micro` of the current step.
  using Samples = std::function<void(int micro, std::vector<std::int32_t>& seq)>;

  // One step's forwards and backwards, gradients accumulated with weight loss_weight per
  // micro-batch (1 / (m x dp) for a mean). Returns the mean loss over the step's micro-batches,
  // on every rank of the pipeline. Tied embedding copies end with the summed gradient.
  // `first_logits` (one stage, one chunk only) receives micro-batch 0's logits [B,T,V], and
  // `micro_losses` each micro-batch's loss on the last stage (for the reference dump).
  double step(const Samples& samples, float loss_weight, float* first_logits = nullptr,
              std::vector<double>* micro_losses = nullptr);

  std::vector<std::unique_ptr<layers::GPT>>& chunks() { return chunks_; }
  // Squared global gradient norm over pp and tp, each tensor counted once.
  double grad_norm_squared(parallel::Comm* tp) const;
  // The pipeline stage that holds parameter p (for a tied wte: the first).
  int stage_of(const layers::ParamInfo& p) const;
  // Seconds waiting for transfers: stage-to-stage receives and tensor-parallel all-reduces.
  double comm_seconds() const;

private:
  const parallel::Grid& grid_;
  parallel::Schedule schedule_;
  int stage_ = 0, p_ = 1, v_ = 1, Q_ = 1, B_ = 0, T_ = 0, C_ = 0;
  int blocks_per_chunk_ = 1;
  std::unique_ptr<parallel::Comm> pp_;
  std::vector<std::unique_ptr<layers::GPT>> chunks_; // chunk c holds virtual stage c * p + stage
  double comm_seconds_ = 0.0;
};

} // namespace gridlm::app
