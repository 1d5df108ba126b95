// Building this rank's chunks of the model and the executor over them.
#include "engine/pipeline_model.hpp"

#include <numeric>

#include <fmt/format.h>

#include "layers/parameters.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {

layers::Precision parse_precision(const std::string& name) {
  if (name == "fp32") return layers::Precision::fp32;
  if (name == "bf16") return layers::Precision::bf16;
  throw Error(fmt::format("train.precision = \"{}\": the choices are fp32 and bf16", name));
}

PipelineModel::PipelineModel(const layers::ModelConfig& model, int B, int T,
                             const parallel::Grid& grid, const parallel::PipelinePlan& plan,
                             std::vector<int> stage_blocks, parallel::Comm* tp, std::uint64_t seed,
                             parallel::TraceRecorder* trace,
                             std::unique_ptr<parallel::Comm> transfers, layers::Precision precision)
    : blocks_(std::move(stage_blocks)), stages_(grid.layout().pp), tp_(tp),
      tp_scalars_(grid.make_mpi_comm(parallel::Axis::tp)) {
  const int stage = grid.coords().pp, v = plan.train.chunks, Q = stages_ * v;
  parallel::run_agreed(grid.comm(), [&] {
    // The layout was checked when it was planned; this only guards against a mismatched call.
    if (plan.train.stages != stages_) {
      throw Error(fmt::format("the schedule has {} stages but parallel.pp = {}", plan.train.stages,
                              stages_));
    }
    if (int(blocks_.size()) != Q ||
        std::accumulate(blocks_.begin(), blocks_.end(), 0) != model.n_layer) {
      throw Error(fmt::format("{} block counts for {} virtual stages of a {}-block model: plan "
                              "them with parallel::plan_stage_blocks",
                              blocks_.size(), Q, model.n_layer));
    }
    first_block_.assign(1, 0);
    for (int n : blocks_)
      first_block_.push_back(first_block_.back() + n);
    for (int c = 0; c < v; ++c) {
      const int q = c * stages_ + stage;
      const layers::StageSpec spec{first_block_[std::size_t(q)], first_block_[std::size_t(q) + 1],
                                   q == 0, q == Q - 1};
      chunks_.push_back(std::make_unique<layers::GPT>(
          model, B, T, spec, tp, plan.slots[std::size_t(stage)],
          plan.split_backward ? layers::Backward::split : layers::Backward::fused, precision));
      layers::init_parameters(chunks_.back()->params(), chunks_.back()->table(), seed);
    }
  });
  std::vector<parallel::Stage*> stages;
  for (auto& c : chunks_)
    stages.push_back(c.get());
  executor_ = std::make_unique<parallel::Executor>(grid, plan, std::move(stages), trace,
                                                   std::move(transfers));
}

int PipelineModel::stage_of(const layers::ParamTable& whole, int index) const {
  const layers::ParamInfo& p = whole.params[std::size_t(index)];
  const int Q = int(blocks_.size());
  if (p.block >= 0) {
    for (int q = 0; q < Q; ++q) {
      if (p.block < first_block_[std::size_t(q) + 1]) return q % stages_;
    }
  }
  if (index == whole.wte || index == whole.wpe) return 0;
  return (Q - 1) % stages_; // final norm and LM head: the last virtual stage
}

layers::MemoryReport PipelineModel::memory() const {
  layers::MemoryReport total;
  for (const auto& chunk : chunks_) {
    const layers::MemoryReport m = chunk->memory();
    total.weights += m.weights;
    total.gradients += m.gradients;
    total.activations += m.activations;
  }
  return total;
}

std::size_t PipelineModel::parameters() const {
  std::size_t n = 0;
  for (const auto& chunk : chunks_)
    n += chunk->table().total;
  return n;
}

} // namespace gridlm::engine
