// The prefetch thread and its hand-over.
#include "io/prefetcher.hpp"

#include <chrono>

#include "parallel/diagnostics.hpp"

namespace gridlm::io {

Prefetcher::Prefetcher(const TokenSource& source, std::function<std::uint64_t(long n)> key,
                       int batch, int length, int depth, int keep)
    : source_(source), key_(std::move(key)), batch_(batch), length_(length),
      depth_(depth < 1 ? 1 : depth), keep_(keep < 0 ? 0 : keep) {
  thread_ = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::read(long n, std::vector<std::int32_t>& out) const {
  out.resize(std::size_t(batch_) * std::size_t(length_));
  const std::uint64_t first = key_(n);
  for (int b = 0; b < batch_; ++b)
    source_.sample(out.data() + std::size_t(b) * std::size_t(length_), first + b, length_);
}

void Prefetcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock,
               [&] { return stop_ || (!error_ && (!again_.empty() || next_ < wanted_ + depth_)); });
    if (stop_) return;
    long n = 0;
    if (!again_.empty()) {
      n = again_.back();
      again_.pop_back();
    } else {
      n = next_++;
    }
    reading_ = n;
    lock.unlock();
    std::vector<std::int32_t> tokens;
    std::exception_ptr error;
    try {
      read(n, tokens);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    reading_ = -1;
    if (error) {
      error_ = error;
    } else {
      done_.emplace(n, std::move(tokens));
    }
    ready_.notify_all();
  }
}

std::vector<std::int32_t> Prefetcher::get(long n) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (n > wanted_) {
    wanted_ = n;
    // Batches far behind are not asked for again.
    done_.erase(done_.begin(), done_.lower_bound(wanted_ - keep_));
    wake_.notify_all();
  }
  const auto start = std::chrono::steady_clock::now();
  auto have = [&] { return done_.count(n) > 0; };
  if (!have() && !stop_) {
    // Already read and let go: the thread reads it again (HDF5 allows one thread at a time).
    // One it is reading now arrives by itself.
    if (n < next_ && n != reading_) {
      again_.push_back(n);
      wake_.notify_all();
    }
    ready_.wait(lock, [&] { return have() || error_; });
  }
  waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (error_) std::rethrow_exception(error_);
  const auto it = done_.find(n);
  if (it != done_.end()) return it->second;
  // The thread has stopped: read here.
  lock.unlock();
  std::vector<std::int32_t> tokens;
  read(n, tokens);
  return tokens;
}

} // namespace gridlm::io
