// The pipeline executor: runs this rank's op list of a schedule over the model chunks it holds,
// with non-blocking point-to-point transfers of activations (forward) and their gradients
// (backward) over the pp axis. Each chunk is a GPT stage holding the blocks the stage layout
// gives its virtual stage (embedding on the first, head on the last) with as many activation
// slots as the schedule keeps micro-batches in flight on this rank. zb-h1 runs a split
// backward: B computes input gradients only, W the weight gradients later.
//
// Transfers are posted one of two ways. MPI: every receive of a step up front, each send as
// soon as its op is done, so a transfer lands whenever its sender is ready. NCCL (whose
// in-order stream would serialise that into a deadlock): before each op, one group of the
// previous op's sends and this op's receive — a plan parallel::check_grouped_transfers proves
// deadlock-free for the schedule before it runs.
//
// Each step is timed per op; the measured bubble is reported beside the simulator's
// prediction for the same measured op costs.
// Lives in app/ because it joins parallel (schedules, communicators) and layers (the model).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "app/trace.hpp"
#include "layers/adamw.hpp"
#include "layers/gpt.hpp"
#include "parallel/grid.hpp"
#include "parallel/schedule.hpp"

namespace gridlm::app {

struct PipelineOptions {
  std::vector<int> stage_blocks;  // blocks per virtual stage (empty: uniform)
  bool grouped_transfers = false; // per-op groups (NCCL); else every receive posted up front
  TraceRecorder* trace = nullptr; // records ops and transfer waits when it is on
  int eval_micro_batches = 1;     // micro-batches of one evaluate()
};

// One step's pipeline timing, the same on every rank of the pipeline.
struct PipelineTiming {
  double seconds = 0.0;          // the slowest stage's time from its step start to its last op
  double bubble = 0.0;           // measured: 1 - (sum of op compute time) / (pp x seconds)
  double predicted_bubble = 0.0; // the simulator's, for the op costs measured in this step
};

class Pipeline {
public:
  // Collective over the grid. Throws gridlm::Error (the same on every rank) for a stage layout
  // that does not fit the model or a schedule whose grouped transfers could deadlock.
  // `pp` carries the activations and gradients between stages (MPI when null).
  Pipeline(const layers::ModelConfig& model, int B, int T, const parallel::Grid& grid,
           const parallel::Schedule& schedule, parallel::Comm* tp, PipelineOptions options = {},
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

  // Forward only, no gradients: the mean loss over options.eval_micro_batches micro-batches
  // (validation), on every rank of the pipeline. Runs between steps.
  double evaluate(const Samples& samples);

  std::vector<std::unique_ptr<layers::GPT>>& chunks() { return chunks_; }
  // Whether this rank's chunks take tokens (the first virtual stage) or targets (the last).
  bool needs_tokens() const { return stage_ == 0 || stage_ == (Q_ - 1) % p_; }
  // Blocks per virtual stage.
  const std::vector<int>& stage_blocks() const { return blocks_; }
  // Squared global gradient norm over pp and tp, each tensor counted once.
  double grad_norm_squared(parallel::Comm* tp) const;
  // The pipeline stage that holds parameter p (for a tied wte: the first).
  int stage_of(const layers::ParamInfo& p) const;
  // Seconds waiting for transfers: stage-to-stage receives and tensor-parallel all-reduces.
  double comm_seconds() const;
  const PipelineTiming& last_timing() const { return timing_; }

private:
  struct OpsResult {
    double loss_sum = 0.0, busy = 0.0, last_end = 0.0; // last_end: steady_seconds()
    std::vector<double> op_seconds;                    // per chunk: F, B, W compute seconds
    std::vector<int> op_count;
  };
  // Runs this stage's list of `schedule` (the training schedule or the forward-only one).
  OpsResult run_ops(const parallel::Schedule& schedule, const Samples& samples, float loss_weight,
                    float* first_logits, std::vector<double>* micro_losses, TraceRecorder* trace);
  // Gathers this step's timing over the pipeline; returns the summed loss of the last stage.
  double finish_step(double span, double busy, double loss_sum,
                     const std::vector<double>& op_seconds, const std::vector<int>& op_count);
  void sum_tied_embedding_grads();

  const parallel::Grid& grid_;
  parallel::Schedule schedule_, eval_schedule_;
  PipelineOptions options_;
  int stage_ = 0, p_ = 1, v_ = 1, Q_ = 1, B_ = 0, T_ = 0, C_ = 0;
  std::vector<int> blocks_, first_block_;  // per virtual stage; first_block_ has Q + 1 entries
  std::unique_ptr<parallel::Comm> pp_mpi_; // host scalars and the tied-embedding sum
  std::unique_ptr<parallel::Comm> pp_owned_;
  parallel::Comm* pp_ = nullptr;                     // stage transfers
  std::vector<std::unique_ptr<layers::GPT>> chunks_; // chunk c holds virtual stage c * p + stage
  double comm_seconds_ = 0.0;
  PipelineTiming timing_;
};

} // namespace gridlm::app
