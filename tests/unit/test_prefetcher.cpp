// The prefetch thread hands over exactly what a direct read gives, for batches asked in order,
// twice, out of order, far ahead, long after they were let go and after stop(); a batch asked
// for while the thread reads it is read once, not twice; and a read that fails reaches the
// caller as the reader's error.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "io/prefetcher.hpp"
#include "io/synthetic_source.hpp"
#include "parallel/diagnostics.hpp"

using namespace gridlm;

namespace {

constexpr int B = 3, L = 17;

std::uint64_t key(long n) { return std::uint64_t(n) * 7 + 2; }

std::vector<std::int32_t> direct(const io::TokenSource& s, long n) {
  std::vector<std::int32_t> out(std::size_t(B) * L);
  for (int b = 0; b < B; ++b)
    s.sample(out.data() + std::size_t(b) * L, key(n) + b, L);
  return out;
}

// The synthetic language, except that one sample cannot be read.
class Failing final : public io::TokenSource {
public:
  explicit Failing(std::uint64_t bad) : bad_(bad), inner_(50, 3) {}
  int vocab_size() const override { return 50; }
  void sample(std::int32_t* out, std::uint64_t index, int length) const override {
    if (index == bad_) throw Error("sample " + std::to_string(index) + " is unreadable");
    inner_.sample(out, index, length);
  }
  std::string describe() const override { return "failing"; }

private:
  std::uint64_t bad_;
  io::SyntheticSource inner_;
};

// The synthetic language, slow to read (a file on a busy file system), counting its reads.
class Slow final : public io::TokenSource {
public:
  Slow() : inner_(50, 3) {}
  int vocab_size() const override { return 50; }
  void sample(std::int32_t* out, std::uint64_t index, int length) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (index < reads_.size()) ++reads_[index];
    inner_.sample(out, index, length);
  }
  std::string describe() const override { return "slow"; }
  int reads(std::uint64_t index) const { return reads_[index]; }

private:
  io::SyntheticSource inner_;
  mutable std::array<std::atomic<int>, 64> reads_{};
};

} // namespace

TEST(Prefetcher, ABatchAskedForWhileItIsReadIsReadOnce) {
  const Slow source;
  io::Prefetcher p(source, key, B, L, 2, 0);
  // The thread is in batch 0's first sample (30 ms for the batch) when it is asked for.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (long n = 0; n < 4; ++n)
    EXPECT_EQ(p.get(n), direct(io::SyntheticSource(50, 3), n)) << "batch " << n;
  p.stop();
  for (long n = 0; n < 4; ++n) {
    for (int b = 0; b < B; ++b)
      EXPECT_EQ(source.reads(key(n) + std::uint64_t(b)), 1) << "batch " << n << ", sample " << b;
  }
}

TEST(Prefetcher, HandsOverWhatADirectReadGives) {
  const io::SyntheticSource source(50, 3);
  io::Prefetcher p(source, key, B, L, 4, 2);
  for (long n : {0L, 1L, 1L, 2L, 3L, 2L, 9L, 4L, 40L, 0L, 41L}) {
    EXPECT_EQ(p.get(n), direct(source, n)) << "batch " << n;
  }
  p.stop();
  EXPECT_EQ(p.get(42), direct(source, 42)) << "after stop, read on the caller's thread";
}

TEST(Prefetcher, AFailedReadReachesTheCaller) {
  const Failing source(key(5) + 1);
  io::Prefetcher p(source, key, B, L, 2, 0);
  EXPECT_NO_THROW(p.get(0));
  try {
    for (long n = 1; n <= 6; ++n)
      p.get(n);
    ADD_FAILURE() << "batch 5 holds an unreadable sample";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is unreadable"), std::string::npos) << e.what();
  }
}
