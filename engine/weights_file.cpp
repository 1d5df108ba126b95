// Weights files: writing gathered tensors from any layout, reading shards into any layout.
#include "engine/weights_file.hpp"

#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layers/gpt.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {

void write_model_attributes(io::H5File& f, const layers::ModelConfig& m) {
  const std::pair<const char*, double> attrs[] = {
      {"vocab_size", m.vocab_size}, {"seq_len", m.seq_len}, {"n_layer", m.n_layer},
      {"n_head", m.n_head},         {"d_model", m.d_model}, {"tied_embeddings", m.tied_embeddings}};
  for (const auto& [name, value] : attrs)
    f.attribute(name, value);
}

layers::ModelConfig read_model_attributes(io::H5File& f) {
  layers::ModelConfig m;
  auto whole = [&](const char* name, int least) {
    const double v = f.number_attribute(name);
    if (v != std::floor(v) || v < least || v > 1e9) {
      throw Error(fmt::format("'{}': attribute {} = {} is not a whole number >= {}", f.path(), name,
                              v, least));
    }
    return int(v);
  };
  m.vocab_size = whole("vocab_size", 1);
  m.seq_len = whole("seq_len", 1);
  m.n_layer = whole("n_layer", 1);
  m.n_head = whole("n_head", 1);
  m.d_model = whole("d_model", 1);
  m.tied_embeddings = whole("tied_embeddings", 0) != 0;
  return m;
}

namespace {

// Shard `p` of this rank in `host` from the whole tensor `global` (of `shape`).
void place(const layers::GPT& gpt, float* host, const layers::ParamInfo& p,
           const std::vector<std::int64_t>& shape, const float* global, const std::string& path) {
  if (shape != p.shape) {
    throw Error(fmt::format("'{}': tensor {} has shape [{}], the model needs [{}]; the "
                            "file was written for another model",
                            path, p.name, fmt::join(shape, ", "), fmt::join(p.shape, ", ")));
  }
  for (std::size_t i = 0; i < p.size; ++i) {
    const std::int64_t g = layers::global_index(p, i, gpt.table().tp_rank);
    host[p.offset + i] = g < 0 ? 0.0f : global[std::size_t(g)];
  }
}

} // namespace

void load_weights(layers::GPT& gpt, io::H5File& f) {
  auto host = Kokkos::create_mirror_view(gpt.params());
  for (const layers::ParamInfo& p : gpt.table().params) {
    // A head-only stage with tied embeddings holds wte under its own name: the file's wte.
    const std::vector<std::int64_t> shape = f.shape(p.name);
    std::size_t n = 1;
    for (auto d : shape)
      n *= std::size_t(d);
    std::vector<float> global(n);
    f.read(p.name, global.data(), n);
    place(gpt, host.data(), p, shape, global.data(), f.path());
  }
  Kokkos::deep_copy(gpt.params(), host);
}

std::size_t place_weight(const layers::GPT& gpt, float* host, const std::string& name,
                         const std::vector<std::int64_t>& shape, const float* global,
                         const std::string& path) {
  const int index = gpt.table().find(name);
  if (index < 0) return 0;
  place(gpt, host, gpt.table().params[std::size_t(index)], shape, global, path);
  return 1;
}

} // namespace gridlm::engine
