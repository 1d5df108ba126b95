// A learnable synthetic language: a fixed random Markov chain over the vocabulary in which each
// token has four possible successors with probabilities 0.55, 0.25, 0.15 and 0.05. A model that
// learns the transitions reaches the chain's entropy rate (about 1.1 nats per token), far below
// the unigram entropy (about ln V). Deterministic from its seed; samples are independent chains
// seeded by (seed, sample index).
#pragma once

#include <array>
#include <vector>

#include "io/token_source.hpp"

namespace gridlm::io {

class SyntheticSource final : public TokenSource {
public:
  SyntheticSource(int vocab_size, std::uint64_t seed);
  int vocab_size() const override { return vocab_; }
  void sample(std::int32_t* out, std::uint64_t index, int length) const override;
  std::string describe() const override;

  // Entropy (nats) of the next token given the current one, and of the stationary unigram
  // distribution: the floor a perfect model reaches, and what a model that ignores context
  // gets.
  double entropy_rate() const;
  double unigram_entropy() const { return unigram_entropy_; }
  // The four tokens that may follow `token`, most likely first.
  const std::array<std::int32_t, 4>& successors(int token) const {
    return next_.at(std::size_t(token));
  }

private:
  int vocab_;
  std::uint64_t seed_;
  std::vector<std::array<std::int32_t, 4>> next_; // successors of each token
  double unigram_entropy_ = 0.0;
};

} // namespace gridlm::io
