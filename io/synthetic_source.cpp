// The synthetic Markov language.
#include "io/synthetic_source.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::io {
namespace {
constexpr std::array<double, 4> successor_probability{0.55, 0.25, 0.15, 0.05};

// splitmix64: a fully specified mixer, so samples are identical on every platform.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
} // namespace

SyntheticSource::SyntheticSource(int vocab_size, std::uint64_t seed)
    : vocab_(vocab_size), seed_(seed) {
  if (vocab_size < 8) {
    throw Error(fmt::format("the synthetic language needs a vocabulary of at least 8 tokens, "
                            "not {}; raise model.vocab_size",
                            vocab_size));
  }
  next_.resize(vocab_size);
  std::uint64_t state = mix(seed);
  for (int t = 0; t < vocab_size; ++t) {
    for (int j = 0; j < 4; ++j) {
      state = mix(state);
      next_[t][j] = std::int32_t(state % std::uint64_t(vocab_size));
    }
  }
  // Stationary distribution by power iteration, for the unigram entropy.
  std::vector<double> p(vocab_size, 1.0 / vocab_size), q(vocab_size);
  for (int it = 0; it < 200; ++it) {
    std::fill(q.begin(), q.end(), 0.0);
    for (int t = 0; t < vocab_size; ++t) {
      for (int j = 0; j < 4; ++j)
        q[next_[t][j]] += p[t] * successor_probability[j];
    }
    p.swap(q);
  }
  for (double x : p) {
    if (x > 0) unigram_entropy_ -= x * std::log(x);
  }
}

void SyntheticSource::sample(std::int32_t* out, std::uint64_t index, int length) const {
  std::uint64_t state = mix(seed_ ^ mix(index + 1));
  out[0] = std::int32_t(state % std::uint64_t(vocab_));
  for (int i = 1; i < length; ++i) {
    state = mix(state);
    const double u = double(state >> 11) * 0x1.0p-53;
    int j = 0;
    double acc = successor_probability[0];
    while (j < 3 && u >= acc)
      acc += successor_probability[++j];
    out[i] = next_[out[i - 1]][j];
  }
}

double SyntheticSource::entropy_rate() const {
  double h = 0.0;
  for (double x : successor_probability)
    h -= x * std::log(x);
  return h; // successors may coincide, which only lowers the true rate
}

std::string SyntheticSource::describe() const {
  return fmt::format("synthetic Markov language: vocabulary {}, seed {}, entropy rate <= {:.3f} "
                     "nats/token, unigram entropy {:.3f}",
                     vocab_, seed_, entropy_rate(), unigram_entropy_);
}

} // namespace gridlm::io
