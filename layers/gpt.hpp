// The GPT-2-style decoder: token + position embedding, pre-LayerNorm blocks of causal
// self-attention and a 4x GELU MLP, final LayerNorm, LM head (tied or not), cross-entropy.
// An instance holds one pipeline stage: any range of blocks, with or without the embedding
// (first stage) and the head (last stage); by default the whole model. Parameters and
// gradients are two flat buffers described by a ParamTable; activations are planned once for
// one micro-batch shape, and a step of any other shape is refused.
//
// Tensor parallelism (Megatron-style) over an optional Comm: QKV and MLP-in are column-parallel
// (each rank its heads and its quarter of the MLP), attention-out and MLP-out row-parallel
// followed by one all-reduce each; the embedding and the LM head + loss are vocabulary-
// parallel. Forward: two all-reduces per block; backward: two (the conjugates, after the
// column-parallel layers). LayerNorms and the row-parallel biases are replicated.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "layers/attention.hpp"
#include "layers/crossentropy.hpp"
#include "layers/model_config.hpp"
#include "layers/parameters.hpp"
#include "parallel/comm.hpp"

namespace gridlm::layers {

// Bytes this rank holds, for the start-up report.
struct MemoryReport {
  std::size_t weights = 0;
  std::size_t gradients = 0;
  std::size_t optimizer = 0; // filled in by the optimiser's owner
  std::size_t activations = 0;
};

class GPT {
public:
  // Plans activations for micro-batches of B sequences of T tokens (T <= model seq_len).
  // `tp` is the tensor-parallel group (null: this rank holds whole tensors). `slots` sets of
  // activations are planned, for micro-batches in flight at once in a pipeline schedule.
  // `split_backward` also plans, per slot, the output gradients of every linear layer, so that
  // backward_input() and backward_weights() can run apart (zero-bubble schedules).
  GPT(const ModelConfig& config, int B, int T, const StageSpec& stage = {},
      parallel::Comm* tp = nullptr, int slots = 1, bool split_backward = false);

  const ModelConfig& config() const { return config_; }
  const ParamTable& table() const { return table_; }
  int batch() const { return B_; }
  int seq() const { return T_; }
  Kokkos::View<float*> params() const { return params_; }
  Kokkos::View<float*> grads() const { return grads_; }
  float* param(int index) const { return params_.data() + table_.params[index].offset; }
  float* grad(int index) const { return grads_.data() + table_.params[index].offset; }

  const StageSpec& stage() const { return stage_; }

  // The whole model: tokens and targets [B,T] on the host; returns the mean loss over the B*T
  // targets. When logits_out is given, the logits [B,T,V] are copied there first.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                 float* logits_out = nullptr);
  // One stage: `tokens` [B,T] when it holds the embedding, else `input` [B,T,C], the previous
  // stage's output. With the head, returns the mean loss against `targets`; without, returns
  // 0 and output() holds the activations [B,T,C] for the next stage.
  // `slot` picks the activation set the micro-batch lives in until its backward.
  double forward_stage(const std::int32_t* tokens, const float* input, const std::int32_t* targets,
                       int B, int T, float* logits_out = nullptr, int slot = 0);
  const float* output(int slot = 0) const;
  int slots() const { return int(slots_.size()); }
  // Accumulates gradients (+=) of loss_weight * mean loss of the last forward. A stage without
  // the head takes `doutput` [B,T,C], the gradient of its output, instead; a stage without
  // the embedding leaves the gradient of its input in input_grad() [B,T,C] (until the next
  // backward: it is shared by the slots).
  void backward(float loss_weight, const float* doutput = nullptr, int slot = 0);
  // The backward in two halves (a model planned with split_backward): backward_input() is
  // backward() without the linear layers' weight gradients (LayerNorm, bias-free embedding and
  // the input gradient all done); it keeps their output gradients in the slot, and
  // backward_weights() later accumulates the weight and bias gradients from them and frees the
  // slot. Together they give exactly what backward() gives.
  void backward_input(float loss_weight, const float* doutput = nullptr, int slot = 0);
  void backward_weights(int slot = 0);
  bool split_backward() const { return split_; }
  const float* input_grad() const { return d_res_; }
  void zero_grad();

  MemoryReport memory() const;
  // This rank's share of the squared global gradient norm: split tensors in full, replicated
  // ones only on tensor-parallel rank 0 (they are equal on every rank), and not the tied copy
  // of wte a head-only stage holds (the first stage counts it). Sum it over tp and pp.
  double grad_sum_of_squares() const;
  // Seconds spent in tensor-parallel all-reduces since construction.
  double comm_seconds() const { return comm_seconds_; }

private:
  struct BlockActs {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd, *fch,
        *fch_gelu, *res3;
    AttentionSaved attn;
    // split backward only: output gradients of proj (res3), fc, attproj (res2) and qkv
    float *d_res3 = nullptr, *d_fch = nullptr, *d_res2 = nullptr, *d_qkv = nullptr;
  };
  // Everything one micro-batch keeps from its forward to its backward.
  struct Slot {
    float *encoded = nullptr, *lnf = nullptr, *lnf_mean = nullptr, *lnf_rstd = nullptr,
          *logits = nullptr, *losses = nullptr, *ce_scratch = nullptr;
    std::vector<BlockActs> blocks;
    Kokkos::View<std::int32_t*> tokens, targets;
    bool have_forward = false;
    bool pending_weights = false; // backward_input done, backward_weights not yet
  };
  Slot& slot_at(int slot);
  void check_shape(int B, int T) const;
  void backward_impl(float loss_weight, const float* doutput, int slot, bool defer_weights);
  void tp_sum(float* data, long n); // all-reduce over the tensor group, timed
  VocabSlice vocab_slice() const;

  ModelConfig config_;
  StageSpec stage_;
  parallel::Comm* tp_ = nullptr;
  int P_ = 1; // tensor-parallel group size
  bool split_ = false;
  double comm_seconds_ = 0.0;
  ParamTable table_;
  int B_ = 0, T_ = 0;
  Kokkos::View<float*> params_, grads_;
  Kokkos::View<float*> acts_;    // every slot's activations, one allocation
  Kokkos::View<float*> scratch_; // backward temporaries, one allocation
  std::vector<Slot> slots_;
  float *d_res_ = nullptr, *d_ln_ = nullptr, *d_qkv_ = nullptr, *d_atty_ = nullptr,
        *d_fch_ = nullptr, *d_fchg_ = nullptr;
  AttentionScratch attn_scratch_{};
};

} // namespace gridlm::layers
