// Gradient norm, learning rate and the AdamW update of every chunk.
#include "engine/optimizer_step.hpp"

#include <cmath>

namespace gridlm::engine {

OptimizerStep::OptimizerStep(const layers::OptimizerConfig& optim, const PipelineModel& model)
    : optim_(optim) {
  for (const auto& chunk : model.chunks())
    adamw_.push_back(std::make_unique<layers::AdamW>(optim_, chunk->table()));
}

OptimizerStep::Result OptimizerStep::apply(PipelineModel& model, int step,
                                           parallel::TraceRecorder* trace) {
  Result r;
  // Split tensors contribute their shards, replicated ones once, over pp and tp.
  r.grad_norm = std::sqrt(model.executor().grad_norm_squared(&model.tp_scalars()));
  r.lr = layers::learning_rate(optim_, step);
  const double start = parallel::steady_seconds();
  for (std::size_t c = 0; c < adamw_.size(); ++c) {
    adamw_[c]->update(model.chunks()[c]->params(), model.chunks()[c]->grads(), step, r.lr,
                      r.grad_norm);
  }
  Kokkos::fence();
  if (trace != nullptr)
    trace->add(parallel::TraceKind::optimizer, start, parallel::steady_seconds());
  return r;
}

std::size_t OptimizerStep::state_bytes() const {
  std::size_t n = 0;
  for (const auto& a : adamw_)
    n += a->state_bytes();
  return n;
}

} // namespace gridlm::engine
