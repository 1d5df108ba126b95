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

int ParamTable::find(const std::string& name) const {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return int(i);
  }
  return -1;
}

ParamTable make_param_table(const ModelConfig& m, const StageSpec& stage) {
  ParamTable t;
  const int last = stage.last_block < 0 ? m.n_layer : stage.last_block;
  if (stage.first_block < 0 || stage.first_block > last || last > m.n_layer) {
    throw Error(fmt::format("a stage of blocks [{}, {}) does not fit a model of {} blocks",
                            stage.first_block, last, m.n_layer));
  }
  t.first_block = stage.first_block;
  const std::int64_t C = m.d_model, V = m.vocab_size, T = m.seq_len;
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
    p.size = 1;
    for (auto d : p.shape)
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
  for (const ParamInfo& p : table.params) {
    // Box-Muller on a 64-bit Mersenne Twister: both fully specified by the C++ standard, so the
    // values are the same with every compiler and library (std::normal_distribution is not).
    std::mt19937_64 rng(seed ^ (fnv1a(p.name) * 0x9E3779B97F4A7C15ull));
    const double two_pi = 6.283185307179586;
    for (std::size_t i = 0; i < p.size; i += 2) {
      if (p.init_std <= 0.0f) {
        host(p.offset + i) = p.init_value;
        if (i + 1 < p.size) host(p.offset + i + 1) = p.init_value;
        continue;
      }
      const double u1 = (double(rng() >> 11) + 0.5) * 0x1.0p-53;
      const double u2 = double(rng() >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      host(p.offset + i) = float(p.init_std * r * std::cos(two_pi * u2));
      if (i + 1 < p.size) host(p.offset + i + 1) = float(p.init_std * r * std::sin(two_pi * u2));
    }
  }
  Kokkos::deep_copy(params, host);
}

} // namespace gridlm::layers
