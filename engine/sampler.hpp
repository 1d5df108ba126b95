// Text generation from a trained model: repeated forwards over a sliding window of the last
// model.seq_len tokens, each new token drawn from the last position's logits with a
// temperature and top-k (temperature 0: the most likely token), among the ids the tokenizer
// has (a vocabulary padded past it has rows no data ever trained), until the end of a document.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "io/h5_file.hpp"
#include "layers/model_config.hpp"

namespace gridlm::layers {
class GPT;
}

namespace gridlm::engine {

struct SampleOptions {
  int tokens = 100;          // new tokens to generate
  double temperature = 0.8;  // softmax temperature; 0 picks the most likely token
  int top_k = 40;            // draw among the k most likely tokens (0: all)
  std::uint64_t seed = 1;    // seed of the draws
  int drawable = 0;          // draw only ids below this (the tokenizer's pieces; 0: every id)
  std::int32_t stop_id = -1; // stop after drawing this id (the end of a document; -1: never)
};

// `gpt` must hold the whole model (embedding and head), planned for B = 1 and T = seq_len, and
// not be tensor-split. The prompt must not be empty. Returns the new tokens (the stop id last,
// when drawn); `emit` sees each as it is drawn. Throws gridlm::Error when the logits are not
// finite (diverged or damaged weights), where a draw would give arbitrary ids.
std::vector<std::int32_t> generate(layers::GPT& gpt, const std::vector<std::int32_t>& prompt,
                                   const SampleOptions& options,
                                   const std::function<void(std::int32_t)>& emit = {});

// The whole model of a weights or checkpoint file on this process, planned for B = 1 and
// T = seq_len: how the command line samples without including the model (and so Kokkos: app/
// is host code, compiled without the device compiler).
class Generator {
public:
  // The model of the weights or checkpoint file at `path`, its weights read once and checked
  // against their checksums (verify_model_file). Throws gridlm::Error naming the file, and the
  // tensors that are damaged, missing or of another shape.
  explicit Generator(const std::string& path);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  // generate() above, on this model.
  std::vector<std::int32_t> generate(const std::vector<std::int32_t>& prompt,
                                     const SampleOptions& options,
                                     const std::function<void(std::int32_t)>& emit = {});

private:
  std::unique_ptr<layers::GPT> gpt_;
};

// The draw itself, for tests: a token from `logits` [V] (finite) under the options, with u
// uniform in [0, 1).
std::int32_t pick_token(const std::vector<float>& logits, const SampleOptions& options, double u);

} // namespace gridlm::engine
