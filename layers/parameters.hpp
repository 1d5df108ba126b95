// The model's parameters as data: every tensor has a name, a global shape, a tensor-parallel
// split, the block it belongs to (its pipeline owner) and whether weight decay applies. All
// parameters live in one flat buffer and all gradients in another; views are offsets into them.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "layers/model_config.hpp"
#include "parallel/comm.hpp"

namespace gridlm::layers {

// How a tensor is divided among the ranks of a tensor-parallel group. rows: dim 0 (output
// features, or the vocabulary) in `parts` equal parts each split separately (3 for the fused
// QKV projection, so every rank holds its heads' q, k and v); cols: dim 1 (input features).
enum class TpSplit { replicated, rows, cols };
enum class ParamKind { weight, bias, norm, embedding };

struct ParamInfo {
  std::string name;                // "h.0.attn.c_attn.weight" (PyTorch naming)
  std::vector<std::int64_t> shape; // global shape
  TpSplit split = TpSplit::replicated;
  int parts = 1;                         // row parts split separately (3 for fused QKV)
  std::vector<std::int64_t> local_shape; // this rank's shard (padded rows included)
  int block = -1; // transformer block, or -1 for embeddings / final norm / head
  ParamKind kind = ParamKind::weight;
  float init_std = 0.0f;   // normal(0, init_std) when > 0
  float init_value = 0.0f; // constant otherwise (1 for norm weights, 0 for biases)
  std::size_t offset = 0;  // into the flat buffers
  std::size_t size = 0;    // elements on this rank
};

// Indices of a block's parameters in ParamTable::params.
struct BlockParams {
  int ln1_w, ln1_b, qkv_w, qkv_b, attproj_w, attproj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w,
      fcproj_b;
};

// The part of the model one pipeline stage holds: blocks [first_block, last_block), plus the
// embeddings on the first stage and the final norm and LM head on the last.
struct StageSpec {
  int first_block = 0;   // first transformer block held
  int last_block = -1;   // one past the last block held (-1: through the model's last block)
  bool embedding = true; // holds the token and position embeddings (the first stage)
  bool head = true;      // holds the final LayerNorm, LM head and loss (the last stage)
};

struct ParamTable {
  std::vector<ParamInfo> params;
  std::vector<BlockParams> blocks; // blocks[i] is model block first_block + i
  int first_block = 0;
  int wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1;
  int lm_head = -1; // == wte when tied (a head-only stage then holds its own copy of wte)
  std::size_t total = 0;
  int tp_rank = 0, tp_size = 1;
  // The vocabulary rows of wte / lm_head this rank holds: [vocab_begin, vocab_begin +
  // vocab_local), of which rows >= vocab_size are padding (see padded_vocab_slice; padding is
  // never predicted and never in the loss).
  std::int64_t vocab_begin = 0, vocab_local = 0;

  int find(const std::string& name) const; // -1 when absent
};

// The table of a stage's parameters (by default the whole model), as rank tp_rank of a
// tensor-parallel group of tp_size holds them. Throws when the model cannot be split so.
ParamTable make_param_table(const ModelConfig& m, const StageSpec& stage = {}, int tp_rank = 0,
                            int tp_size = 1);

// Each rank's vocabulary slice is a multiple of this many rows: logit rows of whole vector
// registers and cache lines for the LM-head GEMM and the loss.
constexpr std::int64_t vocab_pad = 8;
// Rows of the vocabulary one of tp_size ranks holds: ceil(vocab / tp) rounded up to vocab_pad.
std::int64_t padded_vocab_slice(std::int64_t vocab_size, int tp_size);

// Global flat index of element `local` of this rank's shard of p, or -1 for a padding element.
std::int64_t global_index(const ParamInfo& p, std::size_t local, int tp_rank);

// Collective over the tensor group `tp` (null: no split): the tensor at its global shape, from
// every rank's shard `local` (p.size elements in host memory). For the weights file and
// layout-equivalence tests.
std::vector<float> gather_parameter(const ParamInfo& p, const float* local, parallel::Comm* tp);
// p's shard of a model's flat buffer (GPT::params() or grads(), in the execution space's
// memory, a GPU's included), copied to the host.
std::vector<float> shard_to_host(const Kokkos::View<const float*>& model, const ParamInfo& p);
// gather_parameter from a model's flat buffer: p's shard is copied to the host first.
std::vector<float> gather_parameter(const ParamInfo& p, const Kokkos::View<const float*>& model,
                                    parallel::Comm* tp);

// Fills `params` (flat, table.total) with the GPT-2 initialisation from `seed`. Each tensor
// draws from its own generator seeded by (seed, name), so the values do not depend on which
// other tensors a rank holds: every layout initialises a parameter identically.
void init_parameters(Kokkos::View<float*> params, const ParamTable& table, std::uint64_t seed);

} // namespace gridlm::layers
