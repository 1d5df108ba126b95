// The data-parallel gradient reduction, bucketed and overlapped with the backward.
#include "engine/grad_sync.hpp"

#include <algorithm>

#include "engine/comm_backend.hpp"

namespace gridlm::engine {

std::vector<std::pair<std::size_t, std::size_t>> plan_buckets(std::size_t total,
                                                              std::size_t bucket) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  bucket = std::max<std::size_t>(bucket, 1);
  for (std::size_t end = total; end > 0;) {
    const std::size_t begin = end > bucket ? end - bucket : 0;
    ranges.emplace_back(begin, end);
    end = begin;
  }
  return ranges;
}

GradSync::GradSync(const parallel::Grid& grid, const std::string& backend, PipelineModel& model,
                   double bucket_mb)
    : dp_(grid.layout().dp), bucketed_(bucket_mb > 0.0), model_(model),
      grads_(make_axis_comm(grid, parallel::Axis::dp, backend)),
      scalars_(grid.make_mpi_comm(parallel::Axis::dp)) {
  const auto elements = std::size_t(bucket_mb * double(1 << 20) / sizeof(float));
  for (const auto& chunk : model.chunks()) {
    buckets_.emplace_back();
    if (!bucketed_) continue;
    for (const auto& [begin, end] : plan_buckets(chunk->grads().size(), elements)) {
      Bucket b;
      b.begin = begin;
      b.end = end;
      buckets_.back().push_back(std::move(b));
    }
  }
}

void GradSync::start(int chunk, Bucket& b) {
  if (first_start_ < 0.0) first_start_ = parallel::steady_seconds();
  const auto& c = *model_.chunks()[std::size_t(chunk)];
  c.fence(); // the gradients are computed, not just queued, before MPI reads them
  b.request = grads_->iall_reduce(Span<float>(c.grads().data() + b.begin, b.end - b.begin));
  b.started = true;
}

void GradSync::ready(int chunk, std::size_t from) {
  // Buckets run from the buffer's end, and every replica starts the same ones in the same
  // order (they run the same schedule), as a collective over dp requires.
  for (Bucket& b : buckets_[std::size_t(chunk)]) {
    if (b.begin < from) break;
    if (!b.started) {
      start(chunk, b);
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
  if (!bucketed_) {
    for (const auto& chunk : model_.chunks())
      grads_->all_reduce(Span<float>(chunk->grads().data(), chunk->grads().size()));
  }
  timing_.buckets = bucketed_ ? 0 : int(model_.chunks().size());
  timing_.early = early_;
  early_ = 0;
  for (std::size_t c = 0; c < buckets_.size(); ++c) {
    for (Bucket& b : buckets_[c]) {
      if (!b.started) start(int(c), b);
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

} // namespace gridlm::engine
