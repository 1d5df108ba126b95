// io::Prefetcher: reads training batches ahead on a background thread, so that a step finds its
// tokens in memory instead of waiting for the file. The caller names its batches by number n
// (0, 1, 2, … in the order it will use them); batch n is `batch` samples of `length` tokens,
// from global sample key(n) on. The thread keeps up to `depth` batches ready beyond the last
// one asked for, and keeps a step's worth (`keep`) behind it for a second reader of the same
// batch (a pipeline's first and last virtual stage on one rank both need the tokens).
//
// The source must be readable from the background thread alone: io::TokenDataset reads through
// a POSIX handle (no MPI), SyntheticSource computes. HDF5 is not thread-safe, so no other thread
// may call HDF5 while a Prefetcher runs; destroy it (or call stop()) before writing files.
// A read that fails is rethrown by get() on the caller's thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "io/token_source.hpp"

namespace gridlm::io {

class Prefetcher {
public:
  Prefetcher(const TokenSource& source, std::function<std::uint64_t(long n)> key, int batch,
             int length, int depth, int keep);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Batch n ([batch, length] tokens), waiting for it if the thread has not read it yet.
  std::vector<std::int32_t> get(long n);
  // Seconds get() has spent waiting so far.
  double waited() const { return waited_; }
  // Ends the thread (get() afterwards reads on the caller's thread).
  void stop();

private:
  void run();
  void read(long n, std::vector<std::int32_t>& out) const;

  const TokenSource& source_;
  std::function<std::uint64_t(long)> key_;
  int batch_, length_, depth_, keep_;
  std::mutex mutex_;
  std::condition_variable wake_;  // the thread: more batches wanted, or stop
  std::condition_variable ready_; // get(): a batch arrived
  std::map<long, std::vector<std::int32_t>> done_;
  std::vector<long> again_; // batches asked for after they were let go
  long next_ = 0;           // next batch the thread reads
  long wanted_ = 0;         // the thread reads while next_ < wanted_ + depth_
  long reading_ = -1;       // the batch the thread is reading (-1: none)
  bool stop_ = false;
  std::exception_ptr error_;
  double waited_ = 0.0;
  std::thread thread_;
};

} // namespace gridlm::io
