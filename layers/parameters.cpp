// Parameter table construction and initialisation.
#include "layers/parameters.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::layers {

double flops_per_token(const ModelConfig& m) {
  const double C = m.d_model, L = m.n_layer, T = m.seq_len, V = m.vocab_size;
  const double block_params = 12.0 * C * C; // qkv 3C^2 + proj C^2 + mlp 8C^2
  const double matmul_params = L * block_params + V * C;
  const double attention = 2.0 * 2.0 * L * T * C; // QK^T and AV, forward
  return 6.0 * matmul_params + 3.0 * attention;
}

parallel::StageCostModel stage_cost_model(const ModelConfig& m) {
  const double C = m.d_model;
  parallel::StageCostModel c;
  c.blocks = m.n_layer;
  c.block = 12.0 * C * C + double(m.seq_len) * C;
  c.head = double(m.d_model) * m.vocab_size + 5.0 * m.vocab_size + 10.0 * m.d_model;
  c.embedding = 4.0 * m.d_model;
  return c;
}

int ParamTable::find(const std::string& name) const {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return int(i);
  }
  return -1;
}

std::int64_t padded_vocab_slice(std::int64_t vocab_size, int tp_size) {
  const std::int64_t slice = (vocab_size + tp_size - 1) / tp_size;
  return (slice + vocab_pad - 1) / vocab_pad * vocab_pad;
}

std::int64_t global_index(const ParamInfo& p, std::size_t local, int tp_rank) {
  const auto i = std::int64_t(local);
  // Only tensor rank 0 holds all of a tensor whose shard is its size (engine/param_shard.cpp).
  if (p.split == TpSplit::replicated || (tp_rank == 0 && p.local_shape == p.shape)) return i;
  std::int64_t inner = 1;
  for (std::size_t d = 1; d < p.shape.size(); ++d)
    inner *= p.shape[d];
  if (p.split == TpSplit::rows) {
    const std::int64_t row = i / inner, col = i % inner;
    const std::int64_t part_rows = p.shape[0] / p.parts, local_part = p.local_shape[0] / p.parts;
    const std::int64_t part = row / local_part, in_part = tp_rank * local_part + row % local_part;
    if (in_part >= part_rows) return -1;
    return (part * part_rows + in_part) * inner + col;
  }
  const std::int64_t K = p.shape[1], local_k = p.local_shape[1];
  return (i / local_k) * K + tp_rank * local_k + i % local_k;
}

std::vector<float> gather_parameter(const ParamInfo& p, const float* local, parallel::Comm* tp) {
  std::size_t n = 1;
  for (auto d : p.shape)
    n *= std::size_t(d);
  std::vector<float> global(n, 0.0f);
  const int size = tp ? tp->size() : 1;
  std::vector<float> shards(p.size * std::size_t(size));
  if (size > 1) {
    tp->all_gather(Span<const float>(local, p.size), Span<float>(shards));
  } else {
    std::copy(local, local + p.size, shards.begin());
  }
  for (int r = 0; r < size; ++r) {
    for (std::size_t i = 0; i < p.size; ++i) {
      const std::int64_t g = global_index(p, i, r);
      if (g >= 0) global[std::size_t(g)] = shards[std::size_t(r) * p.size + i];
    }
  }
  return global;
}

std::vector<float> shard_to_host(const Kokkos::View<const float*>& model, const ParamInfo& p) {
  const auto shard = Kokkos::subview(model, std::make_pair(p.offset, p.offset + p.size));
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), shard);
  return std::vector<float>(host.data(), host.data() + p.size);
}

std::vector<float> gather_parameter(const ParamInfo& p, const Kokkos::View<const float*>& model,
                                    parallel::Comm* tp) {
  return gather_parameter(p, shard_to_host(model, p).data(), tp);
}

ParamTable make_param_table(const ModelConfig& m, const StageSpec& stage, int tp_rank,
                            int tp_size) {
  ParamTable t;
  t.tp_rank = tp_rank;
  t.tp_size = tp_size;
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
    throw Error(
        fmt::format("tensor-parallel rank {} of {} is not a valid position", tp_rank, tp_size));
  }
  if (m.n_head % tp_size != 0) {
    throw Error(fmt::format("model.n_head = {} is not divisible by parallel.tp = {}: each "
                            "tensor-parallel rank holds whole attention heads; use a tp that "
                            "divides {}",
                            m.n_head, tp_size, m.n_head));
  }
  const int last = stage.last_block < 0 ? m.n_layer : stage.last_block;
  if (stage.first_block < 0 || stage.first_block > last || last > m.n_layer) {
    throw Error(fmt::format("a stage of blocks [{}, {}) does not fit a model of {} blocks",
                            stage.first_block, last, m.n_layer));
  }
  t.first_block = stage.first_block;
  t.params.reserve(std::size_t(12) * std::size_t(last - stage.first_block) + 6); // and the ends
  const std::int64_t C = m.d_model, V = m.vocab_size, T = m.seq_len;
  t.vocab_local = padded_vocab_slice(V, tp_size);
  t.vocab_begin = std::int64_t(tp_rank) * t.vocab_local;
  const float std_w = float(m.init_std);
  const float std_residual = float(m.init_std / std::sqrt(2.0 * m.n_layer));
  auto add = [&](std::string name, std::vector<std::int64_t> shape, ParamKind kind, int block,
                 TpSplit split, float init_std, float init_value) {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.kind = kind;
    p.block = block;
    p.split = split;
    p.init_std = init_std;
    p.init_value = init_value;
    p.parts = p.name.find("c_attn") != std::string::npos ? 3 : 1;
    p.local_shape = p.shape;
    if (split == TpSplit::rows) {
      // Rows of each part divide evenly, except the vocabulary, which is padded.
      const std::int64_t part_rows = p.shape[0] / p.parts;
      p.local_shape[0] = kind == ParamKind::embedding || p.name == "lm_head.weight"
                             ? padded_vocab_slice(part_rows, tp_size)
                             : p.parts * (part_rows / tp_size);
    } else if (split == TpSplit::cols) {
      p.local_shape[1] = p.shape[1] / tp_size;
    }
    p.size = 1;
    for (auto d : p.local_shape)
      p.size *= std::size_t(d);
    p.offset = t.total;
    t.total += p.size;
    t.params.push_back(p);
    return int(t.params.size() - 1);
  };
  // A tied head needs the token embedding even on a stage without the embedding layer.
  if (stage.embedding || (stage.head && m.tied_embeddings)) {
    t.wte = add("wte.weight", {V, C}, ParamKind::embedding, -1, TpSplit::rows, std_w, 0);
  }
  if (stage.embedding) {
    t.wpe = add("wpe.weight", {T, C}, ParamKind::embedding, -1, TpSplit::replicated, std_w, 0);
  }
  for (int l = stage.first_block; l < last; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    BlockParams b{};
    b.ln1_w = add(h + "ln_1.weight", {C}, ParamKind::norm, l, TpSplit::replicated, 0, 1);
    b.ln1_b = add(h + "ln_1.bias", {C}, ParamKind::norm, l, TpSplit::replicated, 0, 0);
    b.qkv_w =
        add(h + "attn.c_attn.weight", {3 * C, C}, ParamKind::weight, l, TpSplit::rows, std_w, 0);
    b.qkv_b = add(h + "attn.c_attn.bias", {3 * C}, ParamKind::bias, l, TpSplit::rows, 0, 0);
    b.attproj_w =
        add(h + "attn.c_proj.weight", {C, C}, ParamKind::weight, l, TpSplit::cols, std_residual, 0);
    b.attproj_b = add(h + "attn.c_proj.bias", {C}, ParamKind::bias, l, TpSplit::replicated, 0, 0);
    b.ln2_w = add(h + "ln_2.weight", {C}, ParamKind::norm, l, TpSplit::replicated, 0, 1);
    b.ln2_b = add(h + "ln_2.bias", {C}, ParamKind::norm, l, TpSplit::replicated, 0, 0);
    b.fc_w = add(h + "mlp.c_fc.weight", {4 * C, C}, ParamKind::weight, l, TpSplit::rows, std_w, 0);
    b.fc_b = add(h + "mlp.c_fc.bias", {4 * C}, ParamKind::bias, l, TpSplit::rows, 0, 0);
    b.fcproj_w = add(h + "mlp.c_proj.weight", {C, 4 * C}, ParamKind::weight, l, TpSplit::cols,
                     std_residual, 0);
    b.fcproj_b = add(h + "mlp.c_proj.bias", {C}, ParamKind::bias, l, TpSplit::replicated, 0, 0);
    t.blocks.push_back(b);
  }
  if (stage.head) {
    t.lnf_w = add("ln_f.weight", {C}, ParamKind::norm, -1, TpSplit::replicated, 0, 1);
    t.lnf_b = add("ln_f.bias", {C}, ParamKind::norm, -1, TpSplit::replicated, 0, 0);
    t.lm_head = m.tied_embeddings
                    ? t.wte
                    : add("lm_head.weight", {V, C}, ParamKind::weight, -1, TpSplit::rows, std_w, 0);
  }
  return t;
}

namespace {

// FNV-1a: a name hash that is the same on every platform (std::hash is not specified).
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

} // namespace

void init_parameters(Kokkos::View<float*> params, const ParamTable& table, std::uint64_t seed) {
  auto host = Kokkos::create_mirror_view(params);
  std::vector<float> global;
  for (const ParamInfo& p : table.params) {
    std::size_t n = 1;
    for (auto d : p.shape)
      n *= std::size_t(d);
    global.assign(n, p.init_value);
    if (p.init_std > 0.0f) {
      // Box-Muller on a 64-bit Mersenne Twister: both fully specified by the C++ standard, so
      // the values are the same with every compiler and library (std::normal_distribution is
      // not). The whole tensor is drawn on every rank and each keeps its shard, so the values
      // do not depend on the layout.
      std::mt19937_64 rng(seed ^ (fnv1a(p.name) * 0x9E3779B97F4A7C15ull));
      const double two_pi = 6.283185307179586;
      for (std::size_t i = 0; i < n; i += 2) {
        const double u1 = (double(rng() >> 11) + 0.5) * 0x1.0p-53;
        const double u2 = double(rng() >> 11) * 0x1.0p-53;
        const double r = std::sqrt(-2.0 * std::log(u1));
        global[i] = float(p.init_std * r * std::cos(two_pi * u2));
        if (i + 1 < n) global[i + 1] = float(p.init_std * r * std::sin(two_pi * u2));
      }
    }
    for (std::size_t i = 0; i < p.size; ++i) {
      const std::int64_t g = global_index(p, i, table.tp_rank);
      host(p.offset + i) = g < 0 ? 0.0f : global[std::size_t(g)];
    }
  }
  Kokkos::deep_copy(params, host);
}

} // namespace gridlm::layers
