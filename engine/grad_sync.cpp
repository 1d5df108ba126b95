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
  const std::size_t elements = bucket_elements(bucket_mb);
  for (const auto& chunk : model.chunks()) {
    const std::size_t total = chunk->grads().size();
    shards_.push_back(plan_shards(total, elements, dp_, grid.coords().dp));
    buckets_.emplace_back(bucketed_ || zero_ ? shards_.back().pieces.size() : 0);
    pad_.emplace_back("engine::GradSync::pad", zero_ ? pad_elements(shards_.back(), dp_) : 0);
    shard_grads_.emplace_back("engine::GradSync::shard_grads",
                              zero_ ? shards_.back().state_size : 0);
  }
  gathers_.resize(model.chunks().size());
}

void GradSync::start(std::size_t chunk, std::size_t piece) {
  if (first_start_ < 0.0) first_start_ = parallel::steady_seconds();
  const auto& c = *model_.chunks()[chunk];
  const ShardPiece& p = shards_[chunk].pieces[piece];
  float* grads = c.grads().data() + p.begin;
  c.fence(); // the gradients are computed, not just queued, before MPI reads them
  // The gather of the last parameters used the buffers this reduce-scatter writes; a forward
  // that read all the chunk's parameters has completed it already.
  wait_gathers(chunk, SIZE_MAX);
  Bucket& b = buckets_[chunk][piece];
  if (!zero_) {
    b.request = grads_->iall_reduce(Span<float>(grads, p.size));
  } else {
    const std::size_t blocks = p.block * std::size_t(dp_);
    const float* in = grads;
    if (padded(p)) {
      float* pad = pad_[chunk].data();
      layers::copy(pad, grads, long(p.size));
      layers::fill_zero(pad + p.size, long(blocks - p.size));
      c.fence();
      in = pad;
    }
    b.request = grads_->ireduce_scatter(Span<const float>(in, blocks),
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
  // The gathers in order: the forward needs the first ones first.
  for (std::size_t c = 0; c < gathers_.size(); ++c) {
    std::vector<Gather>& q = gathers_[c];
    std::size_t done = 0;
    while (done < q.size() && q[done].request.test())
      gathered(c, q[done++]);
    q.erase(q.begin(), q.begin() + long(done));
  }
}

void GradSync::params_needed(int chunk, std::size_t until) {
  if (gathers_left_ == 0) return;
  gather_wait_ += wait_gathers(std::size_t(chunk), until);
  progress();
}

// Not counted in the next step's gather_exposed: the wait lies between steps (a validation or
// a save), outside the step time it would be reported against.
void GradSync::wait_params() {
  for (std::size_t c = 0; c < gathers_.size(); ++c)
    wait_gathers(c, SIZE_MAX);
}

double GradSync::wait_gathers(std::size_t c, std::size_t until) {
  std::vector<Gather>& q = gathers_[c];
  if (q.empty() || shards_[c].pieces[q.front().piece].begin >= until) return 0.0;
  const double start = parallel::steady_seconds();
  std::size_t done = 0;
  for (; done < q.size() && shards_[c].pieces[q[done].piece].begin < until; ++done) {
    q[done].request.wait();
    gathered(c, q[done]);
  }
  q.erase(q.begin(), q.begin() + long(done));
  return parallel::steady_seconds() - start;
}

void GradSync::gathered(std::size_t c, const Gather& g) {
  unpad(c, g.piece, model_.chunks()[c]->params().data());
  model_.chunks()[c]->fence();
  if (--gathers_left_ == 0) gather_done_ = parallel::steady_seconds();
}

double GradSync::finish(double loss, parallel::TraceRecorder* trace) {
  if (dp_ == 1) return loss;
  const double start_wait = parallel::steady_seconds();
  // Buckets that start only now are in flight from here: so the total cannot fall below the
  // exposed part.
  if (first_start_ < 0.0) first_start_ = start_wait;
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
  timing_.in_flight = end - first_start_;
  first_start_ = -1.0;
  // The previous step's parameter gather, completed during this step's forward.
  timing_.gather_in_flight = gather_done_ > gather_posted_ ? gather_done_ - gather_posted_ : 0.0;
  timing_.gather_exposed = gather_wait_;
  timing_.in_flight += timing_.gather_in_flight;
  timing_.exposed += gather_wait_;
  gather_posted_ = gather_done_ = gather_wait_ = 0.0;
  if (trace != nullptr) trace->add(parallel::TraceKind::grad_sync, start_wait, end);
  return total[0] / dp_;
}

std::size_t GradSync::buffer_bytes() const {
  std::size_t n = 0;
  for (std::size_t c = 0; c < shard_grads_.size(); ++c)
    n += shard_grads_[c].size() + pad_[c].size();
  return n * sizeof(float);
}

void GradSync::keep_own(std::size_t c, const float* table, float* state) const {
  for (const ShardPiece& p : shards_[c].pieces)
    layers::copy(state + p.state, table + p.own_begin, long(p.own_size));
}

bool GradSync::padded(const ShardPiece& p) const { return engine::padded(p, dp_); }

parallel::Request GradSync::post_gather(std::size_t c, std::size_t piece, const float* state,
                                        float* table) {
  const ShardPiece& p = shards_[c].pieces[piece];
  float* out = padded(p) ? pad_[c].data() : table + p.begin;
  return grads_->iall_gather(Span<const float>(state + p.state, p.block),
                             Span<float>(out, p.block * std::size_t(dp_)));
}

void GradSync::unpad(std::size_t c, std::size_t piece, float* table) const {
  const ShardPiece& p = shards_[c].pieces[piece];
  if (padded(p)) layers::copy(table + p.begin, pad_[c].data(), long(p.size));
}

void GradSync::gather(std::size_t c, const float* state, float* table) {
  wait_gathers(c, SIZE_MAX); // its buffers
  std::vector<parallel::Request> requests;
  for (std::size_t i = 0; i < shards_[c].pieces.size(); ++i)
    requests.push_back(post_gather(c, i, state, table));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].wait();
    unpad(c, i, table);
  }
}

void GradSync::gather_params() {
  if (!zero_) return;
  wait_params(); // none is left by a step's forward; the buffers are reused
  gather_posted_ = parallel::steady_seconds();
  for (std::size_t c = 0; c < model_.chunks().size(); ++c) {
    float* params = model_.chunks()[c]->params().data();
    // The reduced gradients are spent: their buffer carries the owned parameters out.
    float* own = shard_grads_[c].data();
    layers::fill_zero(own, long(shards_[c].state_size));
    keep_own(c, params, own);
    model_.chunks()[c]->fence();
    // From the buffer's start, where the forward begins (the pieces run from its end).
    for (std::size_t i = shards_[c].pieces.size(); i-- > 0;) {
      gathers_[c].push_back({post_gather(c, i, own, params), i});
      ++gathers_left_;
    }
  }
}

} // namespace gridlm::engine
