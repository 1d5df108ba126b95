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
// gather_params() then starts all-gathering the updated parameters, bucket by bucket from the
// buffer's start, and the next step's forward waits for each bucket only where it first reads
// it (Stage::on_params_needed), so the gather overlaps the forward of the layers before it (and,
// in a pipeline, the wait for the previous stage). Anything else that reads the parameters
// (validation, a checkpoint, the weights file) calls wait_params() first.
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

  // What the executor's step is given: this, when buckets are reduced during the backward or
  // parameters gathered during the forward.
  parallel::GradReduction* during_step() {
    return (bucketed_ || zero_) && dp_ > 1 ? this : nullptr;
  }
  void ready(int chunk, std::size_t from) override;
  void progress() override;
  void params_needed(int chunk, std::size_t until) override;
  // Collective over dp, after the executor's step: every chunk's gradients summed over the
  // replicas (under ZeRO, this replica's owned parts of them: shard_grads()); returns the mean
  // of `loss` over them. The wait is recorded in `trace` (may be null) as the gradient
  // all-reduce.
  double finish(double loss, parallel::TraceRecorder* trace);

  // ZeRO-1. The shard plan of chunk c, and its reduced gradients in the shard layout.
  bool zero() const { return zero_; }
  const ChunkShards& shards(std::size_t c) const { return shards_[c]; }
  Kokkos::View<float*> shard_grads(std::size_t c) const { return shard_grads_[c]; }
  // Collective over dp, after the optimizer: starts sending every replica's owned parameters
  // to all; params_needed() or wait_params() completes them.
  void gather_params();
  // The parameters all there (before anything but the step's forward reads them). Its wait is
  // the caller's: no step's gather_exposed counts it.
  void wait_params();
  // Collective over dp: `table` (chunk c's flat layout) from every replica's `state` (its
  // shard layout), e.g. a moment for a checkpoint; and the owned parts of `table` into `state`.
  void gather(std::size_t c, const float* state, float* table);
  void keep_own(std::size_t c, const float* table, float* state) const;

  struct Timing {
    double in_flight = 0.0; // seconds from the first bucket posted to the last completed
    double exposed = 0.0;   // seconds the step waited for it after its ops (and the gather)
    int buckets = 0;        // buckets reduced
    int early = 0;          // of which started during the backward
    // ZeRO-1: the seconds from the previous step's parameter all-gather posted to its last
    // bucket received, and of them the seconds this step's forward waited (both included in
    // in_flight and exposed above).
    double gather_in_flight = 0.0, gather_exposed = 0.0;
  };
  const Timing& last_timing() const { return timing_; }
  // Bytes of the buffers this holds besides the model's: ZeRO-1's reduced shard and padded copy.
  std::size_t buffer_bytes() const;
  // The data-parallel axis for host scalars (the validation loss).
  parallel::Comm& scalars() { return *scalars_; }

private:
  struct Bucket {
    parallel::Request request;
    bool started = false, done = false;
  };
  void start(std::size_t chunk, std::size_t piece);
  // ZeRO-1's parameter all-gather of one bucket, in flight.
  struct Gather {
    parallel::Request request;
    std::size_t piece = 0;
  };
  // A bucket that does not divide by dp goes through pad_ (at most one per chunk).
  bool padded(const ShardPiece& p) const;
  // Starts all-gathering bucket `piece` of chunk c from every replica's `state` (shard layout)
  // into `table` (flat layout), or into pad_ for a padded bucket, which unpad() then copies out.
  parallel::Request post_gather(std::size_t c, std::size_t piece, const float* state, float* table);
  void unpad(std::size_t c, std::size_t piece, float* table) const;
  // Completes chunk c's gathers of the buckets that begin before `until`; returns the seconds
  // it waited.
  double wait_gathers(std::size_t c, std::size_t until);
  void gathered(std::size_t c, const Gather& g); // after its request completed

  int dp_ = 1;
  bool bucketed_ = false, zero_ = false;
  PipelineModel& model_;
  std::unique_ptr<parallel::Comm> grads_, scalars_;
  std::vector<ChunkShards> shards_;               // per chunk: the buckets, from its end
  std::vector<std::vector<Bucket>> buckets_;      // per chunk, one per piece
  std::vector<Kokkos::View<float*>> shard_grads_; // ZeRO: [state_size] per chunk
  std::vector<Kokkos::View<float*>> pad_;         // a bucket not divisible by dp, padded
  std::vector<std::vector<Gather>> gathers_;      // per chunk, in flight, from the buffer's start
  std::size_t gathers_left_ = 0;                  // of all chunks
  double gather_posted_ = 0.0, gather_done_ = 0.0, gather_wait_ = 0.0; // steady_seconds(), s
  double first_start_ = -1.0; // steady_seconds() of this step's first bucket
  int early_ = 0;             // buckets this step started during the backward
  Timing timing_;
};

} // namespace gridlm::engine
