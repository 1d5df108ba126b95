// The order in which training visits a dataset's samples: for each epoch a pseudo-random
// permutation of [0, n) computed on demand from (seed, epoch), with no table in memory. A run's
// position is then one number, the global sample cursor c: epoch c / n, position c % n. Since
// the cursor does not depend on how many data-parallel replicas share the work, a run can stop
// and continue with a different number of replicas and see the same samples.
#pragma once

#include <cstdint>

namespace gridlm::io {

// splitmix64's finaliser: a fully specified 64-bit mixer, the same on every platform.
std::uint64_t mix64(std::uint64_t x);

class SampleOrder {
public:
  // n >= 1 samples.
  SampleOrder(std::uint64_t n, std::uint64_t seed);
  std::uint64_t size() const { return n_; }
  // The sample visited at `position` (< size()) of `epoch`.
  std::uint64_t at(std::uint64_t epoch, std::uint64_t position) const;
  // The sample the global cursor points at.
  std::uint64_t operator()(std::uint64_t cursor) const { return at(cursor / n_, cursor % n_); }

private:
  std::uint64_t n_, seed_;
  int half_bits_; // the permutation runs over [0, 4^half_bits) and walks back into [0, n)
};

} // namespace gridlm::io
