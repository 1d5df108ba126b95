// Gradient norm, learning rate and the AdamW update of every chunk (or of its owned shard).
#include "engine/optimizer_step.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/comm_mpi.hpp"

namespace gridlm::engine {

OptimizerStep::OptimizerStep(const layers::OptimizerConfig& optim, const PipelineModel& model,
                             GradSync& sync, const parallel::Grid& grid)
    : optim_(optim), sync_(sync), grid_(grid) {
  for (std::size_t c = 0; c < model.chunks().size(); ++c) {
    const layers::ParamTable& table = model.chunks()[c]->table();
    table_sizes_.push_back(table.total);
    if (!sync.zero()) {
      adamw_.push_back(std::make_unique<layers::AdamW>(optim_, table));
      continue;
    }
    std::vector<layers::AdamWSegment> segments;
    for (const ShardPiece& p : sync.shards(c).pieces) {
      if (p.own_size > 0) segments.push_back({p.own_begin, p.state, p.own_size});
    }
    adamw_.push_back(
        std::make_unique<layers::AdamW>(optim_, table, segments, sync.shards(c).state_size));
  }
}

double OptimizerStep::owned_sum_of_squares(const PipelineModel& model) const {
  double total = 0.0;
  for (std::size_t c = 0; c < adamw_.size(); ++c) {
    const layers::GPT& chunk = *model.chunks()[c];
    const float* grads = sync_.shard_grads(c).data();
    for (const layers::AdamWSegment& s : adamw_[c]->segments()) {
      // The parts of the segment that fall in each counted tensor.
      for (std::size_t i = 0; i < chunk.table().params.size(); ++i) {
        const layers::ParamInfo& p = chunk.table().params[i];
        const std::size_t begin = std::max(s.param, p.offset);
        const std::size_t end = std::min(s.param + s.size, p.offset + p.size);
        if (begin >= end || !chunk.counts_in_norm(int(i))) continue;
        total += layers::sum_of_squares(
            Kokkos::View<const float*, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                grads + s.state + (begin - s.param), end - begin));
      }
    }
  }
  return total;
}

double OptimizerStep::grad_norm(const PipelineModel& model) const {
  if (sync_.zero()) {
    // Each element once over the whole grid: its owner in dp, split tensors' shards over tp,
    // replicated ones on tp rank 0, a tied copy on the first stage only.
    std::vector<double> total{owned_sum_of_squares(model)};
    parallel::MpiComm all(parallel::borrow_comm(grid_.comm()));
    all.all_reduce(Span<double>(total));
    return std::sqrt(total[0]);
  }
  // Split tensors contribute their shards, replicated ones once, over pp and tp.
  return std::sqrt(model.executor().grad_norm_squared(&model.tp_scalars()));
}

void OptimizerStep::update(PipelineModel& model, double lr, double grad_norm,
                           parallel::TraceRecorder* trace) {
  const double start = parallel::steady_seconds();
  for (std::size_t c = 0; c < adamw_.size(); ++c) {
    const Kokkos::View<float*> grads =
        sync_.zero() ? sync_.shard_grads(c) : model.chunks()[c]->grads();
    adamw_[c]->update(model.chunks()[c]->params(), grads, updates_, lr, grad_norm);
  }
  ++updates_;
  Kokkos::fence();
  if (trace != nullptr)
    trace->add(parallel::TraceKind::optimizer, start, parallel::steady_seconds());
}

void OptimizerStep::poison_gradient(PipelineModel& model) {
  for (std::size_t c = 0; c < adamw_.size(); ++c) {
    const layers::GPT& chunk = *model.chunks()[c];
    const Kokkos::View<float*> grads = sync_.zero() ? sync_.shard_grads(c) : chunk.grads();
    for (std::size_t i = 0; i < chunk.table().params.size(); ++i) {
      const layers::ParamInfo& p = chunk.table().params[i];
      if (!chunk.counts_in_norm(int(i))) continue;
      std::size_t at = p.offset; // the element's index in `grads`
      bool found = !sync_.zero();
      for (const layers::AdamWSegment& s : adamw_[c]->segments()) {
        if (found) break;
        const std::size_t begin = std::max(s.param, p.offset);
        if (begin < std::min(s.param + s.size, p.offset + p.size)) {
          at = s.state + (begin - s.param);
          found = true;
        }
      }
      if (!found) continue;
      Kokkos::deep_copy(Kokkos::subview(grads, at), std::nanf(""));
      return;
    }
  }
}

std::size_t OptimizerStep::state_bytes() const {
  std::size_t n = 0;
  for (const auto& a : adamw_)
    n += a->state_bytes();
  return n;
}

Kokkos::View<float*> OptimizerStep::moment(std::size_t c, int which, bool gathered) const {
  const Kokkos::View<float*> state = which == 1 ? adamw_[c]->moment1() : adamw_[c]->moment2();
  if (!sync_.zero()) return state;
  Kokkos::View<float*> table("engine::OptimizerStep::moment", table_sizes_[c]);
  if (gathered) sync_.gather(c, state.data(), table.data());
  return table;
}

void OptimizerStep::load_moment(std::size_t c, int which, const HostTable& table) {
  const Kokkos::View<float*> state = which == 1 ? adamw_[c]->moment1() : adamw_[c]->moment2();
  if (!sync_.zero()) {
    Kokkos::deep_copy(state, table);
    return;
  }
  Kokkos::View<float*> whole("engine::OptimizerStep::load_moment", table.size());
  Kokkos::deep_copy(whole, table);
  sync_.keep_own(c, whole.data(), state.data());
  Kokkos::fence();
}

} // namespace gridlm::engine
