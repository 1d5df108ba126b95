// A keyed Feistel network over the smallest power of four holding n, walked until it lands
// below n ("cycle walking"). A Feistel network is a bijection whatever its round function, and
// cycle walking restricts a bijection of a larger domain to one of [0, n); because the domain
// is less than 4 n, a walk takes under four steps on average.
#include "io/sample_order.hpp"

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::io {
namespace {
constexpr int rounds = 6; // enough that neighbouring positions land far apart
} // namespace

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

SampleOrder::SampleOrder(std::uint64_t n, std::uint64_t seed) : n_(n), seed_(seed), half_bits_(1) {
  if (n == 0 || n > (std::uint64_t(1) << 62)) {
    throw Error(fmt::format("a sample order covers 1 to 2^62 samples, not {}", n));
  }
  while ((std::uint64_t(1) << (2 * half_bits_)) < n)
    ++half_bits_;
}

std::uint64_t SampleOrder::at(std::uint64_t epoch, std::uint64_t position) const {
  if (position >= n_) {
    throw Error(fmt::format("sample position {} is outside the {} samples", position, n_));
  }
  const std::uint64_t mask = (std::uint64_t(1) << half_bits_) - 1;
  const std::uint64_t key = mix64(seed_ ^ mix64(epoch + 0x5851F42D4C957F2Dull));
  std::uint64_t x = position;
  do {
    std::uint64_t left = x >> half_bits_, right = x & mask;
    for (int r = 0; r < rounds; ++r) {
      const std::uint64_t f = mix64(key + std::uint64_t(r) * 0x9E3779B97F4A7C15ull + right) & mask;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);
  return x;
}

} // namespace gridlm::io
