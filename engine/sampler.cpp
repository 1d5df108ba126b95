// Sampling: window, forward, draw.
#include "engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "engine/checkpoint_tools.hpp"
#include "engine/weights_file.hpp"
#include "layers/gpt.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

// splitmix64: a portable stream of uniform doubles (std::uniform_real_distribution differs
// between standard libraries).
class Uniform {
public:
  explicit Uniform(std::uint64_t seed) : state_(seed) {}
  double next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z >> 11) * 0x1.0p-53;
  }

private:
  std::uint64_t state_;
};

} // namespace

std::int32_t pick_token(const std::vector<float>& logits, const SampleOptions& o, double u) {
  const int V = o.drawable > 0 ? std::min(o.drawable, int(logits.size())) : int(logits.size());
  std::vector<std::int32_t> order(std::size_t(V), 0);
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [&](std::int32_t a, std::int32_t b) {
    return logits[std::size_t(a)] > logits[std::size_t(b)] ||
           (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
  };
  if (o.temperature <= 0.0) return *std::min_element(order.begin(), order.end(), more_likely);
  const int k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
  const double top = logits[std::size_t(order[0])];
  std::vector<double> weight(static_cast<std::size_t>(k));
  double total = 0.0;
  for (int i = 0; i < k; ++i) {
    weight[std::size_t(i)] =
        std::exp((logits[std::size_t(order[std::size_t(i)])] - top) / o.temperature);
    total += weight[std::size_t(i)];
  }
  double r = u * total;
  for (int i = 0; i < k; ++i) {
    r -= weight[std::size_t(i)];
    if (r < 0.0) return order[std::size_t(i)];
  }
  return order[std::size_t(k - 1)];
}

std::vector<std::int32_t> generate(layers::GPT& gpt, const std::vector<std::int32_t>& prompt,
                                   const SampleOptions& o,
                                   const std::function<void(std::int32_t)>& emit) {
  const layers::ModelConfig& m = gpt.config();
  const int T = m.seq_len, V = m.vocab_size;
  if (!gpt.stage().embedding || !gpt.stage().head || gpt.table().tp_size != 1 || gpt.batch() != 1 ||
      gpt.seq() != T) {
    throw Error("sampling needs the whole, unsplit model planned for one sequence of seq_len");
  }
  if (prompt.empty()) throw Error("sampling needs a prompt of at least one token");
  for (std::int32_t id : prompt) {
    if (id < 0 || id >= V) {
      throw Error(fmt::format("prompt token {} is outside the vocabulary of {}", id, V));
    }
  }
  const auto t = static_cast<std::size_t>(T);
  std::vector<std::int32_t> context = prompt, out, window(t);
  std::vector<float> logits(static_cast<std::size_t>(V)); // [V] at the context's last token
  Uniform uniform(o.seed);
  for (int n = 0; n < o.tokens; ++n) {
    // The last T tokens; positions after them are padding the causal mask keeps out.
    const std::size_t len = std::min(context.size(), std::size_t(T));
    std::fill(window.begin(), window.end(), 0);
    std::copy(context.end() - std::ptrdiff_t(len), context.end(), window.begin());
    gpt.next_token_logits(window.data(), int(len) - 1, logits.data());
    if (!std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); })) {
      throw Error(fmt::format("the model's logits for token {} are not finite (NaN or inf): its "
                              "weights diverged or are damaged; sample from a checkpoint saved "
                              "before the loss diverged",
                              n + 1));
    }
    const std::int32_t next = pick_token(logits, o, uniform.next());
    context.push_back(next);
    out.push_back(next);
    if (emit) emit(next);
    if (next == o.stop_id) break;
  }
  return out;
}

Generator::Generator(const std::string& path) {
  Kokkos::View<float*>::HostMirror host; // the parameters (on a CPU, themselves) as read
  std::size_t placed = 0;
  verify_model_file(
      path, Tensors::weights,
      [&](const FileSummary& file, const TensorSummary& t, const std::vector<float>& data) {
        if (!gpt_) {
          gpt_ = layers::GPT::for_sampling(file.model);
          host = Kokkos::create_mirror_view(gpt_->params());
        }
        placed += place_weight(*gpt_, host.data(), t.name,
                               std::vector<std::int64_t>(t.shape.begin(), t.shape.end()),
                               data.data(), path);
      });
  if (!gpt_ || placed != gpt_->table().params.size()) {
    throw Error(fmt::format("'{}' holds {} of the model's {} weight tensors", path, placed,
                            gpt_ ? gpt_->table().params.size() : std::size_t(0)));
  }
  Kokkos::deep_copy(gpt_->params(), host);
}

Generator::~Generator() = default;

std::vector<std::int32_t> Generator::generate(const std::vector<std::int32_t>& prompt,
                                              const SampleOptions& options,
                                              const std::function<void(std::int32_t)>& emit) {
  return engine::generate(*gpt_, prompt, options, emit);
}

} // namespace gridlm::engine
