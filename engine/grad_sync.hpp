// engine::GradSync: gradient synchronisation over the data-parallel axis. Each replica's
// gradients already carry their 1/(accum x dp) share of the mean, so the sum over replicas is
// the mean gradient; the step's loss is averaged the same way.
//
// Bucketed (parallel.grad_bucket_mb > 0): each chunk's flat gradient buffer is cut into
// buckets counted from its end, where the backward starts (engine/dp_shards). The executor
// reports, from within a chunk's last weight-gradient op, how far from the end the gradients
// are final; every bucket wholly inside that range starts its non-blocking collective at once,
// and the requests are tested between layers and between ops, which is what drives MPI's
// progress. The rest (the embeddings, whose tied copies are summed over the pipeline after the
// last op) start when the step's ops are done; finish() then waits. What it waits is the
// exposed time; the time from the first bucket posted to the last completed is the whole
// reduction's time in flight. Unbucketed (0): one blocking all-reduce per chunk after the
// backward (one bucket per chunk under ZeRO).
//
// ZeRO-1 (parallel.zero = 1): each bucket is reduce-scattered instead, into this replica's
// owned part of it (the shard layout of engine/dp_shards), which is all its optimizer updates;
// gather_params() then all-gathers the updated parameters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/dp_shards.hpp"
#include "engine/pipeline_model.hpp"
#include "parallel/comm.hpp"
#include "parallel/executor.hpp"
#include "parallel/grid.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {

class GradSync : public parallel::GradReduction {
public:
  // `backend` carries the gradients (mpi or nccl); host scalars always go over MPI.
  // `bucket_mb`: parallel.grad_bucket_mb; `zero`: parallel.zero. The model must outlive this.
  GradSync(const parallel::Grid& grid, const std::string& backend, PipelineModel& model,
           double bucket_mb, int zero);

  // What the executor's step is given: this, when buckets are reduced during the backward.
  parallel::GradReduction* during_backward() { return bucketed_ && dp_ > 1 ? this : nullptr; }
  void ready(int chunk, std::size_t from) override;
  void progress() override;
  // Collective over dp, after the executor's step: every chunk's gradients summed over the
  // replicas (under ZeRO, this replica's owned parts of them: shard_grads()); returns the mean
  // of `loss` over them. The wait is recorded in `trace` (may be null) as the gradient
  // all-reduce.
  double finish(double loss, parallel::TraceRecorder* trace);

  // ZeRO-1. The shard plan of chunk c, and its reduced gradients in the shard layout.
  bool zero() const { return zero_; }
  const ChunkShards& shards(std::size_t c) const { return shards_[c]; }
  Kokkos::View<float*> shard_grads(std::size_t c) const { return shard_grads_[c]; }
  // Collective over dp, after the optimizer: every replica's owned parameters to all.
  void gather_params();
  // Collective over dp: `table` (chunk c's flat layout) from every replica's `state` (its
  // shard layout), e.g. a moment for a checkpoint; and the owned parts of `table` into `state`.
  void gather(std::size_t c, const float* state, float* table);
  void keep_own(std::size_t c, const float* table, float* state) const;

  struct Timing {
    double in_flight = 0.0; // seconds from the first bucket posted to the last completed
    double exposed = 0.0;   // seconds the step waited for it after its ops (and the gather)
    int buckets = 0;        // buckets reduced
    int early = 0;          // of which started during the backward
  };
  const Timing& last_timing() const { return timing_; }
  // The data-parallel axis for host scalars (the validation loss).
  parallel::Comm& scalars() { return *scalars_; }

private:
  struct Bucket {
    parallel::Request request;
    bool started = false, done = false;
  };
  void start(std::size_t chunk, std::size_t piece);

  int dp_ = 1;
  bool bucketed_ = false, zero_ = false;
  PipelineModel& model_;
  std::unique_ptr<parallel::Comm> grads_, scalars_;
  std::vector<ChunkShards> shards_;               // per chunk: the buckets, from its end
  std::vector<std::vector<Bucket>> buckets_;      // per chunk, one per piece
  std::vector<Kokkos::View<float*>> shard_grads_; // ZeRO: [state_size] per chunk
  std::vector<Kokkos::View<float*>> pad_;         // a bucket not divisible by dp, padded
  double first_start_ = -1.0;                     // steady_seconds() of this step's first bucket
  int early_ = 0;                                 // buckets this step started during the backward
  Timing timing_;
};

} // namespace gridlm::engine
