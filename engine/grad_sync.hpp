// engine::GradSync: gradient synchronisation over the data-parallel axis. Each replica's
// gradients already carry their 1/(accum x dp) share of the mean, so the sum over replicas is
// the mean gradient; the step's loss is averaged the same way. Today one blocking all-reduce of
// each chunk's flat gradient buffer after the backward: this is the room where bucketed,
// overlapped reduction and ZeRO-1's reduce-scatter go.
#pragma once

#include <memory>
#include <string>

#include "engine/pipeline_model.hpp"
#include "parallel/comm.hpp"
#include "parallel/grid.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {

class GradSync {
public:
  // `backend` carries the gradients (mpi or nccl); host scalars always go over MPI.
  GradSync(const parallel::Grid& grid, const std::string& backend);
  // Collective over dp: sums every chunk's gradients over the replicas and returns the mean of
  // `loss` over them. Recorded in `trace` (may be null) as the gradient all-reduce.
  double reduce(PipelineModel& model, double loss, parallel::TraceRecorder* trace);
  // The data-parallel axis for host scalars (the validation loss).
  parallel::Comm& scalars() { return *scalars_; }

private:
  int dp_ = 1;
  std::unique_ptr<parallel::Comm> grads_, scalars_;
};

} // namespace gridlm::engine
