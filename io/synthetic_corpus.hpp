// A learnable synthetic English-like corpus: the built-in text `gridlm prepare-data --synthetic`
// tokenizes, so that a real tokenizer, real documents and the whole dataset path are exercised
// without downloading anything. Each document has a topic (the farm, the sea, ...) that fixes
// its characters, things and places, a title line, and sentences from a small grammar with the
// agreements English has: subject and verb ("the hen sees", "the hens see"), number ("one dog",
// "three dogs"), article ("a cat", "an owl"), pronoun ("does it?", "do they?"). A model learns
// the grammar and topic consistency quickly; the words themselves stay random within it.
#pragma once

#include <cstdint>
#include <string>

namespace gridlm::io {

class SyntheticCorpus {
public:
  explicit SyntheticCorpus(std::uint64_t seed) : seed_(seed) {}
  // Document `index`, a pure function of (seed, index): any rank can make any document.
  std::string document(std::uint64_t index) const;

private:
  std::uint64_t seed_;
};

} // namespace gridlm::io
