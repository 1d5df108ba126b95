// The data-parallel gradient all-reduce.
#include "engine/grad_sync.hpp"

#include <vector>

#include "engine/comm_backend.hpp"

namespace gridlm::engine {

GradSync::GradSync(const parallel::Grid& grid, const std::string& backend)
    : dp_(grid.layout().dp), grads_(make_axis_comm(grid, parallel::Axis::dp, backend)),
      scalars_(grid.make_mpi_comm(parallel::Axis::dp)) {}

double GradSync::reduce(PipelineModel& model, double loss, parallel::TraceRecorder* trace) {
  if (dp_ == 1) return loss;
  const double start = parallel::steady_seconds();
  for (const auto& chunk : model.chunks())
    grads_->all_reduce(Span<float>(chunk->grads().data(), chunk->grads().size()));
  std::vector<double> total{loss};
  scalars_->all_reduce(Span<double>(total));
  if (trace != nullptr)
    trace->add(parallel::TraceKind::grad_sync, start, parallel::steady_seconds());
  return total[0] / dp_;
}

} // namespace gridlm::engine
