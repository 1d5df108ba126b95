// The sample order is a permutation of [0, n) for every epoch (each sample exactly once), a
// pure function of (seed, epoch), different between epochs and seeds, and well shuffled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/sample_order.hpp"
#include "parallel/diagnostics.hpp"

using gridlm::io::SampleOrder;

namespace {
std::vector<std::uint64_t> epoch_of(const SampleOrder& order, std::uint64_t epoch) {
  std::vector<std::uint64_t> out(order.size());
  for (std::uint64_t i = 0; i < order.size(); ++i)
    out[i] = order.at(epoch, i);
  return out;
}
} // namespace

TEST(SampleOrder, EveryEpochVisitsEverySampleOnce) {
  for (std::uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 16ull, 17ull, 100ull, 1000ull,
                          4095ull, 4096ull, 4097ull, 65537ull}) {
    const SampleOrder order(n, 42);
    for (std::uint64_t epoch : {0ull, 1ull, 9ull}) {
      std::vector<std::uint64_t> seen = epoch_of(order, epoch);
      std::sort(seen.begin(), seen.end());
      for (std::uint64_t i = 0; i < n; ++i)
        ASSERT_EQ(seen[i], i) << "n " << n << " epoch " << epoch;
    }
  }
}

TEST(SampleOrder, CursorIsEpochAndPosition) {
  const SampleOrder order(37, 5);
  for (std::uint64_t c = 0; c < 37 * 4; ++c)
    EXPECT_EQ(order(c), order.at(c / 37, c % 37));
}

TEST(SampleOrder, DeterministicAndDifferentPerEpochAndSeed) {
  const SampleOrder a(1000, 1), b(1000, 1), c(1000, 2);
  EXPECT_EQ(epoch_of(a, 3), epoch_of(b, 3));
  EXPECT_NE(epoch_of(a, 0), epoch_of(a, 1));
  EXPECT_NE(epoch_of(a, 0), epoch_of(c, 0));
}

TEST(SampleOrder, IsShuffled) {
  const std::uint64_t n = 10000;
  const std::vector<std::uint64_t> p = epoch_of(SampleOrder(n, 7), 0);
  // Few fixed points and few neighbours kept together (about 1 and 2 expected by chance).
  int fixed = 0, adjacent = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    fixed += p[i] == i;
    if (i + 1 < n) adjacent += (p[i + 1] == p[i] + 1 || p[i] == p[i + 1] + 1);
  }
  EXPECT_LT(fixed, 10);
  EXPECT_LT(adjacent, 20);
  // Position and sample are uncorrelated: |r| is about 1/sqrt(n) = 0.01 by chance.
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double x = double(i), y = double(p[i]);
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
  }
  const double r = (n * sxy - sx * sy) / std::sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
  EXPECT_LT(std::abs(r), 0.05);
  // Each quarter of the positions draws from every quarter of the samples.
  for (int q = 0; q < 4; ++q) {
    int counts[4] = {0, 0, 0, 0};
    for (std::uint64_t i = q * n / 4; i < (q + 1) * n / 4; ++i)
      ++counts[p[i] * 4 / n];
    for (int c : counts)
      EXPECT_GT(c, 500) << "quarter " << q;
  }
}

TEST(SampleOrder, RefusesAnEmptyDataset) {
  EXPECT_THROW(SampleOrder(0, 1), gridlm::Error);
  const SampleOrder order(10, 1);
  EXPECT_THROW(order.at(0, 10), gridlm::Error);
}
