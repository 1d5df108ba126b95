// The data-parallel gradient reduction: bucketed, overlapped with the backward, and ZeRO-1's
// reduce-scatter and parameter all-gather.
#include "engine/grad_sync.hpp"

#include <algorithm>

#include "engine/comm_backend.hpp"
#include "layers/kernels.hpp"

namespace gridlm::engine {

GradSync::GradSync(const parallel::Grid& grid, const std::string& backend, PipelineModel& model,
                   double bucket_mb, int zero)
    : dp_(grid.layout().dp), bucketed_(bucket_mb > 0.0), zero_(zero == 1 && grid.layout().dp > 1),
      model_(model), grads_(make_axis_comm(grid, parallel::Axis::dp, backend)),
      scalars_(grid.make_mpi_comm(parallel::Axis::dp)) {
  const auto elements = std::size_t(bucket_mb * double(1 << 20) / sizeof(float));
  for (const auto& chunk : model.chunks()) {
    const std::size_t total = chunk->grads().size();
    shards_.push_back(plan_shards(total, bucketed_ ? std::max<std::size_t>(elements, 1) : 0, dp_,
                                  grid.coords().dp));
    buckets_.emplace_back(bucketed_ || zero_ ? shards_.back().pieces.size() : 0);
    std::size_t pad = 0;
    for (const ShardPiece& p : shards_.back().pieces) {
      if (p.size != p.block * std::size_t(dp_)) pad = std::max(pad, p.block * std::size_t(dp_));
    }
    pad_.emplace_back("engine::GradSync::pad", zero_ ? pad : 0);
    shard_grads_.emplace_back("engine::GradSync::shard_grads",
                              zero_ ? shards_.back().state_size : 0);
  }
}

void GradSync::start(std::size_t chunk, std::size_t piece) {
  if (first_start_ < 0.0) first_start_ = parallel::steady_seconds();
  const auto& c = *model_.chunks()[chunk];
  const ShardPiece& p = shards_[chunk].pieces[piece];
  float* grads = c.grads().data() + p.begin;
  c.fence(); // the gradients are computed, not just queued, before MPI reads them
  Bucket& b = buckets_[chunk][piece];
  if (!zero_) {
    b.request = grads_->iall_reduce(Span<float>(grads, p.size));
  } else {
    const std::size_t padded = p.block * std::size_t(dp_);
    const float* in = grads;
    if (padded != p.size) {
      float* pad = pad_[chunk].data();
      layers::copy(pad, grads, long(p.size));
      layers::fill_zero(pad + p.size, long(padded - p.size));
      c.fence();
      in = pad;
    }
    b.request = grads_->ireduce_scatter(Span<const float>(in, padded),
                                        Span<float>(shard_grads_[chunk].data() + p.state, p.block));
  }
  b.started = true;
}

void GradSync::ready(int chunk, std::size_t from) {
  // Buckets run from the buffer's end, and every replica starts the same ones in the same
  // order (they run the same schedule), as a collective over dp requires.
  const auto c = std::size_t(chunk);
  for (std::size_t i = 0; i < buckets_[c].size(); ++i) {
    if (shards_[c].pieces[i].begin < from) break;
    if (!buckets_[c][i].started) {
      start(c, i);
      ++early_;
    }
  }
  progress();
}

void GradSync::progress() {
  for (auto& chunk : buckets_) {
    for (Bucket& b : chunk) {
      if (b.started && !b.done) b.done = b.request.test();
    }
  }
}

double GradSync::finish(double loss, parallel::TraceRecorder* trace) {
  if (dp_ == 1) return loss;
  const double start_wait = parallel::steady_seconds();
  const bool whole_buffers = !bucketed_ && !zero_;
  if (whole_buffers) {
    for (const auto& chunk : model_.chunks())
      grads_->all_reduce(Span<float>(chunk->grads().data(), chunk->grads().size()));
  }
  timing_.buckets = whole_buffers ? int(model_.chunks().size()) : 0;
  timing_.early = early_;
  early_ = 0;
  for (std::size_t c = 0; c < buckets_.size(); ++c) {
    for (std::size_t i = 0; i < buckets_[c].size(); ++i) {
      if (!buckets_[c][i].started) start(c, i);
    }
  }
  for (auto& chunk : buckets_) {
    for (Bucket& b : chunk) {
      b.request.wait();
      b.started = b.done = false;
      ++timing_.buckets;
    }
  }
  std::vector<double> total{loss};
  scalars_->all_reduce(Span<double>(total));
  const double end = parallel::steady_seconds();
  timing_.exposed = end - start_wait;
  timing_.in_flight = end - (first_start_ < 0.0 ? start_wait : first_start_);
  first_start_ = -1.0;
  if (trace != nullptr) trace->add(parallel::TraceKind::grad_sync, start_wait, end);
  return total[0] / dp_;
}

void GradSync::keep_own(std::size_t c, const float* table, float* state) const {
  for (const ShardPiece& p : shards_[c].pieces)
    layers::copy(state + p.state, table + p.own_begin, long(p.own_size));
}

void GradSync::gather(std::size_t c, const float* state, float* table) {
  const auto n = std::size_t(dp_);
  std::vector<parallel::Request> requests;
  const ShardPiece* padded = nullptr;
  for (const ShardPiece& p : shards_[c].pieces) {
    const bool even = p.size == p.block * n;
    if (!even) padded = &p;
    float* out = even ? table + p.begin : pad_[c].data();
    requests.push_back(grads_->iall_gather(Span<const float>(state + p.state, p.block),
                                           Span<float>(out, p.block * n)));
  }
  for (parallel::Request& r : requests)
    r.wait();
  if (padded != nullptr) layers::copy(table + padded->begin, pad_[c].data(), long(padded->size));
}

void GradSync::gather_params() {
  if (!zero_) return;
  const double start = parallel::steady_seconds();
  for (std::size_t c = 0; c < model_.chunks().size(); ++c) {
    float* params = model_.chunks()[c]->params().data();
    // The reduced gradients are spent: their buffer carries the owned parameters out.
    float* own = shard_grads_[c].data();
    layers::fill_zero(own, long(shards_[c].state_size));
    keep_own(c, params, own);
    model_.chunks()[c]->fence();
    gather(c, own, params);
  }
  const double seconds = parallel::steady_seconds() - start;
  timing_.exposed += seconds;
  timing_.in_flight += seconds;
}

} // namespace gridlm::engine
