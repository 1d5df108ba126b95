// engine::GradSync: gradient synchronisation over the data-parallel axis. Each replica's
// gradients already carry their 1/(accum x dp) share of the mean, so the sum over replicas is
// the mean gradient; the step's loss is averaged the same way.
//
// Bucketed (parallel.grad_bucket_mb > 0): each chunk's flat gradient buffer is cut into
// buckets counted from its end, where the backward starts. The executor reports, from within a
// chunk's last weight-gradient op, how far from the end the gradients are final; every bucket
// wholly inside that range starts its non-blocking all-reduce at once, and the requests are
// tested between layers and between ops, which is what drives MPI's progress. The rest (the
// embeddings, whose tied copies are summed over the pipeline after the last op) start when the
// step's ops are done; finish() then waits. What it waits is the exposed time; the time from
// the first bucket posted to the last completed is the reduction's whole time in flight.
// Unbucketed (0): one blocking all-reduce per chunk after the backward.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/pipeline_model.hpp"
#include "parallel/comm.hpp"
#include "parallel/executor.hpp"
#include "parallel/grid.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {

// [begin, end) ranges of a buffer of `total` elements in buckets of `bucket` elements, from
// the end of the buffer to its start: every bucket is whole but the last (the buffer's start).
std::vector<std::pair<std::size_t, std::size_t>> plan_buckets(std::size_t total,
                                                              std::size_t bucket);

class GradSync : public parallel::GradReduction {
public:
  // `backend` carries the gradients (mpi or nccl); host scalars always go over MPI.
  // `bucket_mb`: parallel.grad_bucket_mb. The model must outlive this.
  GradSync(const parallel::Grid& grid, const std::string& backend, PipelineModel& model,
           double bucket_mb);

  // What the executor's step is given: this, when buckets are reduced during the backward.
  parallel::GradReduction* during_backward() { return bucketed_ && dp_ > 1 ? this : nullptr; }
  void ready(int chunk, std::size_t from) override;
  void progress() override;
  // Collective over dp, after the executor's step: every chunk's gradients summed over the
  // replicas; returns the mean of `loss` over them. The wait is recorded in `trace` (may be
  // null) as the gradient all-reduce.
  double finish(double loss, parallel::TraceRecorder* trace);

  struct Timing {
    double in_flight = 0.0; // seconds from the first bucket posted to the last completed
    double exposed = 0.0;   // seconds the step waited for it after its ops
    int buckets = 0;        // buckets reduced
    int early = 0;          // of which started during the backward
  };
  const Timing& last_timing() const { return timing_; }
  // The data-parallel axis for host scalars (the validation loss).
  parallel::Comm& scalars() { return *scalars_; }

private:
  struct Bucket {
    std::size_t begin = 0, end = 0;
    parallel::Request request;
    bool started = false, done = false;
  };
  void start(int chunk, Bucket& b);

  int dp_ = 1;
  bool bucketed_ = false;
  PipelineModel& model_;
  std::unique_ptr<parallel::Comm> grads_, scalars_;
  std::vector<std::vector<Bucket>> buckets_; // per chunk, from the end of its buffer
  double first_start_ = -1.0;                // steady_seconds() of this step's first bucket
  int early_ = 0;                            // buckets this step started during the backward
  Timing timing_;
};

} // namespace gridlm::engine
