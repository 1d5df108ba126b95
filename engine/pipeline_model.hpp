// engine::PipelineModel: this rank's share of the model and the executor that runs it — one
// layers::GPT chunk per virtual stage this pipeline stage holds (embedding on the first, head
// on the last, the blocks the stage layout gives each), each a tensor-parallel shard planned
// with the activation slots the pipeline plan asks for, and a parallel::Executor over them.
// It also knows which stage holds each parameter of the whole model (for the weights file).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/gpt.hpp"
#include "parallel/executor.hpp"
#include "parallel/grid.hpp"
#include "parallel/pipeline_plan.hpp"

namespace gridlm::engine {

// train.precision's value ("fp32" or "bf16"); anything else is an Error naming the key.
layers::Precision parse_precision(const std::string& name);

class PipelineModel {
public:
  // Collective over the grid. `stage_blocks`: blocks per virtual stage, as
  // parallel::plan_stage_blocks gave them. `tp` is the tensor group (null: none); `transfers`
  // carries stage transfers (MPI when null); `trace` may be null. Chunks are initialised with
  // the GPT-2 initialisation from `seed`.
  PipelineModel(const layers::ModelConfig& model, int B, int T, const parallel::Grid& grid,
                const parallel::PipelinePlan& plan, std::vector<int> stage_blocks,
                parallel::Comm* tp, std::uint64_t seed, parallel::TraceRecorder* trace = nullptr,
                std::unique_ptr<parallel::Comm> transfers = nullptr,
                layers::Precision precision = layers::Precision::fp32);

  // Chunk c holds virtual stage c x pp + stage.
  const std::vector<std::unique_ptr<layers::GPT>>& chunks() const { return chunks_; }
  parallel::Executor& executor() { return *executor_; }
  const parallel::Executor& executor() const { return *executor_; }
  const std::vector<int>& stage_blocks() const { return blocks_; }
  parallel::Comm* tp() const { return tp_; }
  // The tensor group over MPI, for host scalars (the gradient norm), whatever tp's backend.
  parallel::Comm& tp_scalars() const { return *tp_scalars_; }
  // The pipeline stage holding parameter `index` of the whole model's table (for a tied wte:
  // the first).
  int stage_of(const layers::ParamTable& whole, int index) const;
  // Bytes of weights, gradients and activations this rank holds, and its parameter count.
  layers::MemoryReport memory() const;
  std::size_t parameters() const;

private:
  std::vector<int> blocks_, first_block_; // per virtual stage; first_block_ has Q + 1 entries
  int stages_ = 1;
  parallel::Comm* tp_ = nullptr;
  std::unique_ptr<parallel::Comm> tp_scalars_;
  std::vector<std::unique_ptr<layers::GPT>> chunks_;
  std::unique_ptr<parallel::Executor> executor_;
};

} // namespace gridlm::engine
