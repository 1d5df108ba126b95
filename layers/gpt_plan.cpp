// Where a GPT's memory comes from: its constructors, the parameter table, one allocation each
// for the activations of every slot and for the backward's scratch carved into the kernels'
// buffers (llm.c's single allocation with named views), and the memory report that counts them.
#include <fmt/format.h>

#include <algorithm>

#include "layers/attention.hpp"
#include "layers/gpt.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::layers {
namespace {

// Hands out consecutive slices of one allocation; sizes are counted in a first pass.
class Carver {
public:
  explicit Carver(float* base) : base_(base) {}
  float* take(std::size_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    used_ += n;
    return p;
  }
  std::size_t used() const { return used_; }

private:
  float* base_;
  std::size_t used_ = 0;
};

void check_config(const ModelConfig& m) {
  if (m.n_head <= 0 || m.d_model % m.n_head != 0) {
    throw Error(fmt::format("model.d_model = {} is not divisible by model.n_head = {}; choose a "
                            "width that is a multiple of the head count",
                            m.d_model, m.n_head));
  }
  if (m.vocab_size <= 0 || m.seq_len <= 0 || m.n_layer <= 0 || m.d_model <= 0) {
    throw Error("model.vocab_size, seq_len, n_layer and d_model must all be positive");
  }
}

} // namespace

GPT::GPT(const ModelConfig& config, int B, int T, const StageSpec& stage, parallel::Comm* tp,
         int slots, Backward backward, Precision precision)
    : GPT(PlanOnly{}, config, B, T, stage, tp ? tp->rank() : 0, tp ? tp->size() : 1, slots,
          backward, precision) {
  tp_ = tp;
  allocate(true);
}

std::unique_ptr<GPT> GPT::for_sampling(const ModelConfig& config) {
  std::unique_ptr<GPT> gpt(new GPT(PlanOnly{}, config, 1, config.seq_len, StageSpec{}, 0, 1, 1,
                                   Backward::fused, Precision::fp32));
  gpt->allocate(false);
  return gpt;
}

void GPT::allocate(bool training) {
  const int B = B_, T = T_;
  if (training) {
    params_ = Kokkos::View<float*>("layers::GPT::params", table_.total);
    grads_ = Kokkos::View<float*>("layers::GPT::grads", table_.total);
  } else {
    // Sampling: zeroing weights about to be read from a file, and gradients never computed,
    // took a third of the start-up of a 342 MB model.
    params_ = Kokkos::View<float*>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "layers::GPT::params"), table_.total);
  }
  for (Slot& sl : slots_) {
    sl.tokens = Kokkos::View<std::int32_t*>("layers::GPT::tokens", std::size_t(B) * T);
    sl.targets = Kokkos::View<std::int32_t*>("layers::GPT::targets", std::size_t(B) * T);
    if (!host_teams && stage_.embedding) {
      sl.token_links =
          Kokkos::View<std::int32_t*>("layers::GPT::token_links", 2 * std::size_t(B) * T);
    }
  }
  plan_buffers(true);
  if constexpr (!host_teams) plan_norm_chunks();
  boundary_pool_ = BufferPool::create("layers::GPT::boundary", boundary_size());
}

MemoryReport GPT::planned_memory(const ModelConfig& config, int B, int T, const StageSpec& stage,
                                 int tp_size, int slots, Backward backward, Precision precision) {
  return GPT(PlanOnly{}, config, B, T, stage, 0, tp_size, slots, backward, precision).memory();
}

GPT::GPT(PlanOnly, const ModelConfig& config, int B, int T, const StageSpec& stage, int tp_rank,
         int tp_size, int slots, Backward backward, Precision precision)
    : config_(config), stage_(stage), tp_size_(tp_size), split_(backward == Backward::split),
      precision_(precision), B_(B), T_(T) {
  if (slots < 1)
    throw Error(fmt::format("a model needs at least one activation slot, not {}", slots));
  check_config(config);
  if (B <= 0 || T <= 0 || T > config.seq_len) {
    throw Error(fmt::format("micro-batch of {} x {} tokens: need at least 1 x 1 and at most "
                            "model.seq_len = {} tokens per sequence",
                            B, T, config.seq_len));
  }
  table_ = make_param_table(config, stage, tp_rank, tp_size_);
  if (stage_.last_block < 0) stage_.last_block = config.n_layer;
  slots_.resize(slots);
  plan_buffers(false);
}

// Every slot's activations and the backward's scratch, each one allocation carved into the
// buffers the kernels use (`carve`; else only counted).
void GPT::plan_buffers(bool carve) {
  // Local widths: this rank's heads, MLP columns and vocabulary rows.
  const std::size_t N = std::size_t(B_) * T_, C = config_.d_model, Cl = C / tp_size_,
                    V = table_.vocab_local, NH = config_.n_head / tp_size_,
                    L = table_.blocks.size();
  // Two passes: count, allocate, then hand out pointers.
  for (int pass = 0; pass < (carve ? 2 : 1); ++pass) {
    Carver a(pass == 0 ? nullptr : acts_.data());
    for (Slot& sl : slots_) {
      sl.encoded = a.take(N * C);
      sl.blocks.assign(L, BlockActs{});
      for (BlockActs& b : sl.blocks) {
        b.ln1 = a.take(N * C);
        b.ln1_mean = a.take(N);
        b.ln1_rstd = a.take(N);
        b.qkv = a.take(N * 3 * Cl);
        b.attn.q = a.take(N * Cl);
        b.attn.k = a.take(N * Cl);
        b.attn.v = a.take(N * Cl);
        b.attn.att = a.take(std::size_t(B_) * NH * attention_scores_per_head(T_));
        b.atty = a.take(N * Cl);
        b.res2 = a.take(N * C);
        b.ln2 = a.take(N * C);
        b.ln2_mean = a.take(N);
        b.ln2_rstd = a.take(N);
        b.fch = a.take(N * 4 * Cl);
        b.fch_gelu = a.take(N * 4 * Cl);
        b.res3 = a.take(N * C);
        if (split_) {
          b.d_res3 = a.take(N * C);
          b.d_fch = a.take(N * 4 * Cl);
          b.d_res2 = a.take(N * C);
          b.d_qkv = a.take(N * 3 * Cl);
        }
      }
      if (stage_.head) {
        sl.lnf = a.take(N * C);
        sl.lnf_mean = a.take(N);
        sl.lnf_rstd = a.take(N);
        sl.logits = a.take(N * V);
        sl.losses = a.take(N);
        sl.ce_scratch = a.take(3 * N);
      }
    }

    Carver s(pass == 0 ? nullptr : scratch_.data());
    d_res_ = s.take(N * C);
    d_ln_ = s.take(N * C);
    d_qkv_ = s.take(N * 3 * Cl);
    d_atty_ = s.take(N * Cl);
    d_fch_ = s.take(N * 4 * Cl);
    d_fchg_ = s.take(N * 4 * Cl);
    attn_scratch_.yh = s.take(N * Cl);
    attn_scratch_.heads_at_once = attention_heads_per_launch(long(B_) * long(NH));
    attn_scratch_.datt =
        s.take(std::size_t(attn_scratch_.heads_at_once) * std::size_t(attention_block) * T_);
    attn_scratch_.dq = s.take(N * Cl);
    attn_scratch_.dk = s.take(N * Cl);
    attn_scratch_.dv = s.take(N * Cl);
    if (precision_ == Precision::bf16) {
      weight_bf16_ = s.take(std::max(4 * Cl * C, stage_.head ? V * C : 0));
      d_res_bf16_ = s.take(N * C);
    }
    if (pass == 0) {
      acts_floats_ = a.used();
      scratch_floats_ = s.used();
    }
    if (pass == 0 && carve) {
      acts_ = Kokkos::View<float*>("layers::GPT::activations", a.used());
      scratch_ = Kokkos::View<float*>("layers::GPT::scratch", s.used());
    }
  }
}

void GPT::plan_norm_chunks() {
  constexpr long chunk = 1024;
  std::vector<long> bounds;
  for (std::size_t i = 0; i < table_.params.size(); ++i) {
    const ParamInfo& p = table_.params[i];
    if (!counts_in_norm(int(i))) continue;
    for (long b = long(p.offset); b < long(p.offset + p.size); b += chunk)
      bounds.insert(bounds.end(), {b, std::min(b + chunk, long(p.offset + p.size))});
  }
  norm_chunks_ = Kokkos::View<long*>("layers::GPT::norm_chunks", bounds.size());
  Kokkos::deep_copy(
      norm_chunks_,
      Kokkos::View<const long*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          bounds.data(), bounds.size()));
}

MemoryReport GPT::memory() const {
  MemoryReport r;
  r.weights = table_.total * sizeof(float);
  r.gradients = table_.total * sizeof(float);
  // Tokens and targets, and on a GPU the embedding's token chains (two more), per slot.
  const std::size_t ids = !host_teams && stage_.embedding ? 4 : 2;
  r.activations = (acts_floats_ + scratch_floats_) * sizeof(float) +
                  slots_.size() * ids * std::size_t(B_) * T_ * sizeof(std::int32_t);
  return r;
}

} // namespace gridlm::layers
