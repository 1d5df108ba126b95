// parallel::Executor: runs this rank's op list of a pipeline plan over the model chunks it
// holds (parallel::Stage, one per virtual stage on this rank), with non-blocking point-to-point
// transfers of activations (forward) and their gradients (backward) over the pp axis. Chunk c
// is virtual stage c x pp + stage; between two chunks on one rank the hand-over is a copy.
// zb-h1 runs a split backward: B computes input gradients only, W the weight gradients later.
//
// Transfers are posted one of two ways (PipelinePlan::grouped). Up front (MPI): every receive
// of a step at its start, each send as soon as its op is done, so a transfer lands whenever its
// sender is ready. Grouped (NCCL, whose in-order stream would serialise that into a deadlock):
// before each op, one group of the previous op's sends and this op's receive — a plan
// parallel::check_grouped_transfers proved deadlock-free when the plan was made.
//
// Each step is timed per op; the measured bubble is reported beside the simulator's
// prediction for the same measured op costs.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "parallel/grid.hpp"
#include "parallel/pipeline_plan.hpp"
#include "parallel/stage.hpp"
#include "parallel/tied_embedding.hpp"
#include "parallel/trace.hpp"

namespace gridlm::parallel {

// One step's pipeline timing, the same on every rank of the pipeline.
struct PipelineTiming {
  double seconds = 0.0;          // the slowest stage's time from its step start to its last op
  double bubble = 0.0;           // measured: 1 - (sum of op compute time) / (pp x seconds)
  double predicted_bubble = 0.0; // the simulator's, for the op costs measured in this step
};

// What a step tells the data-parallel gradient reduction, so that it can start reducing the
// gradients a chunk has finished while the rest of the schedule runs.
class GradReduction {
public:
  virtual ~GradReduction() = default;
  // Chunk `chunk`'s gradients at flat offsets [from, end) are final for this step (called
  // from within the chunk's last weight-gradient op, with decreasing `from`).
  virtual void ready(int chunk, std::size_t from) = 0;
  // Between ops: lets transfers in flight progress.
  virtual void progress() = 0;
  // Chunk `chunk`'s forward is about to read its parameters at flat offsets [0, until): returns
  // once they are there (called from within every forward of the step).
  virtual void params_needed(int chunk, std::size_t until) = 0;
};

class Executor {
public:
  // `chunks`: this rank's model chunks, chunk c for virtual stage c x pp + stage, each planned
  // with the plan's slots for this stage; they must outlive the executor. `transfers` carries
  // the activations and gradients between stages (an MPI pp communicator when null). `trace`
  // (may be null) records ops and transfer waits while it is on. Throws gridlm::Error when the
  // plan does not fit the grid or the chunks.
  Executor(const Grid& grid, const PipelinePlan& plan, std::vector<Stage*> chunks,
           TraceRecorder* trace = nullptr, std::unique_ptr<Comm> transfers = nullptr);

  // Fills tokens [B, T+1] for micro-batch `micro` of the current step.
  using Samples = std::function<void(int micro, std::vector<std::int32_t>& seq)>;

  // One step's forwards and backwards, gradients accumulated with weight loss_weight per
  // micro-batch (1 / (m x dp) for a mean). Returns the mean loss over the step's micro-batches,
  // on every rank of the pipeline. Tied embedding copies end with the summed gradient. `dp`
  // (may be null) hears of each chunk's gradients as its last weight-gradient op finishes them.
  double step(const Samples& samples, float loss_weight, GradReduction* dp = nullptr);

  // Forward only, no gradients: the mean loss over the plan's validation micro-batches, on
  // every rank of the pipeline. Runs between steps.
  double evaluate(const Samples& samples);

  void zero_grad();
  // Whether this rank's chunks take tokens (the first virtual stage) or targets (the last).
  bool needs_tokens() const { return stage_ == 0 || stage_ == (virtual_stages_ - 1) % stages_; }
  // Squared global gradient norm over pp and tp, each tensor counted once; `tp` (null: no tensor
  // group) reduces a host double, so it must be an MPI communicator.
  double grad_norm_squared(Comm* tp) const;
  // Seconds waiting for transfers: stage-to-stage receives and the chunks' own communication.
  double comm_seconds() const;
  const PipelineTiming& last_timing() const { return timing_; }
  const PipelinePlan& plan() const { return plan_; }
  // Host memory of the tied-embedding exchange (0 where this rank holds no copy, or untied).
  std::size_t tied_exchange_bytes() const { return tied_ ? tied_->host_bytes() : 0; }

private:
  struct OpsResult {
    double loss_sum = 0.0, busy = 0.0, last_end = 0.0; // last_end: steady_seconds()
    std::vector<double> op_seconds;                    // per chunk: F, B, W compute seconds
    std::vector<int> op_count;
  };
  // Runs this stage's list of `schedule` (the training schedule or the forward-only one).
  // `tied` (null: none) hears of each chunk's last weight-gradient op.
  OpsResult run_ops(const Schedule& schedule, const Samples& samples, float loss_weight,
                    TraceRecorder* trace, GradReduction* dp, TiedEmbeddingSum* tied);
  // Gathers this step's timing over the pipeline; returns the summed loss of the last stage.
  double finish_step(double span, const OpsResult& r);

  PipelinePlan plan_;
  int stage_ = 0;  // this rank's pipeline stage
  int stages_ = 1; // pp
  int chunks_per_stage_ = 1;
  int virtual_stages_ = 1; // pp x chunks
  std::vector<Stage*> chunks_;
  TraceRecorder* trace_ = nullptr;
  std::unique_ptr<Comm> pp_mpi_;           // host scalars and the tied-embedding sum
  std::unique_ptr<TiedEmbeddingSum> tied_; // null: untied, or one virtual stage
  std::unique_ptr<Comm> pp_owned_;
  Comm* pp_ = nullptr; // stage transfers
  double comm_seconds_ = 0.0;
  PipelineTiming timing_;
};

} // namespace gridlm::parallel
