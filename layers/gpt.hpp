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
//
// A GPT is a parallel::Stage: the pipeline executor runs its micro-batches through that
// interface (forward_micro, backward, backward_input, backward_weights, boundary buffers).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "layers/attention.hpp"
#include "layers/buffer_pool.hpp"
#include "layers/crossentropy.hpp"
#include "layers/model_config.hpp"
#include "layers/parameters.hpp"
#include "parallel/comm.hpp"
#include "parallel/stage.hpp"

namespace gridlm::layers {

// Bytes this rank holds, for the start-up report.
struct MemoryReport {
  std::size_t weights = 0;
  std::size_t gradients = 0;
  std::size_t optimizer = 0; // filled in by the optimiser's owner
  std::size_t activations = 0;
};

// Whether a model's backward runs whole, or in halves (input gradients, then weight gradients).
enum class Backward { fused, split };

class GPT : public parallel::Stage {
public:
  // Plans activations for micro-batches of B sequences of T tokens (T <= model seq_len).
  // `tp` is the tensor-parallel group (null: this rank holds whole tensors). `slots` sets of
  // activations are planned, for micro-batches in flight at once in a pipeline schedule.
  // Backward::split also plans, per slot, the output gradients of every linear layer, so that
  // backward_input() and backward_weights() can run apart (zero-bubble schedules).
  // `precision` is that of the matrix products (see Precision): in bf16 the activations that
  // only products read are stored rounded, and a scratch holds the rounded weight of the
  // product at hand and the rounded residual gradient.
  GPT(const ModelConfig& config, int B, int T, const StageSpec& stage = {},
      parallel::Comm* tp = nullptr, int slots = 1, Backward backward = Backward::fused,
      Precision precision = Precision::fp32);

  // The whole model for sampling (next_token_logits): one sequence of seq_len tokens, fp32,
  // without gradients, its parameters uninitialised until the caller loads them.
  static std::unique_ptr<GPT> for_sampling(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  Precision precision() const { return precision_; }
  const ParamTable& table() const { return table_; }
  int batch() const override { return B_; }
  int seq() const override { return T_; }
  Kokkos::View<float*> params() const { return params_; }
  Kokkos::View<float*> grads() const { return grads_; }
  float* param(int index) const { return params_.data() + table_.params[index].offset; }
  float* grad(int index) const { return grads_.data() + table_.params[index].offset; }
  // Copies of one tensor's shard in host memory (param and grad point into the execution
  // space's memory, which a GPU build's host cannot read).
  std::vector<float> host_param(int index) const;
  std::vector<float> host_grad(int index) const;

  const StageSpec& stage() const { return stage_; }

  // The whole model: tokens and targets [B,T] on the host; returns the mean loss over the B*T
  // targets. When logits_out is given, the logits [B,T,V] are copied there first.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                 float* logits_out = nullptr);
  // The logits [V] that the tokens [T] (one sequence, of the T the model was planned for) give
  // at `position`: the forward, then the head of that one row, without a loss (sampling).
  void next_token_logits(const std::int32_t* tokens, int position, float* logits_out);
  // One stage: `tokens` [B,T] when it holds the embedding, else `input` [B,T,C], the previous
  // stage's output. With the head, returns the mean loss against `targets`; without, returns
  // 0 and output() holds the activations [B,T,C] for the next stage.
  // `slot` picks the activation set the micro-batch lives in until its backward.
  double forward_stage(const std::int32_t* tokens, const float* input, const std::int32_t* targets,
                       int B, int T, float* logits_out = nullptr, int slot = 0);
  const float* output(int slot = 0) const override;
  int slots() const override { return int(slots_.size()); }
  // Accumulates gradients (+=) of loss_weight * mean loss of the last forward. A stage without
  // the head takes `doutput` [B,T,C], the gradient of its output, instead; a stage without
  // the embedding leaves the gradient of its input in input_grad() [B,T,C] (until the next
  // backward: it is shared by the slots).
  void backward(float loss_weight, const float* doutput = nullptr, int slot = 0) override;
  // The backward in two halves (a model planned with split_backward): backward_input() is
  // backward() without the linear layers' weight gradients (LayerNorm, bias-free embedding and
  // the input gradient all done); it keeps their output gradients in the slot, and
  // backward_weights() later accumulates the weight and bias gradients from them and frees the
  // slot. Together they give exactly what backward() gives.
  void backward_input(float loss_weight, const float* doutput = nullptr, int slot = 0) override;
  void backward_weights(int slot = 0) override;
  bool split_backward() const override { return split_; }
  const float* input_grad() const override { return d_res_; }
  void zero_grad() override;
  void on_grads_done(GradsDone hook) override { grads_done_ = std::move(hook); }
  void on_params_needed(ParamsNeeded hook) override { params_needed_ = std::move(hook); }

  // The rest of parallel::Stage (see parallel/stage.hpp).
  std::size_t boundary_size() const override;
  bool takes_tokens() const override { return stage_.embedding; }
  bool takes_targets() const override { return stage_.head; }
  double forward_micro(int slot, const std::int32_t* tokens, const float* input,
                       const std::int32_t* targets) override;
  std::size_t tied_embedding_size() const override;
  Span<float> tied_embedding_grad() override;
  Buffer boundary_buffer() const override;
  void copy_boundary(float* to, const float* from) const override;
  void copy_to_host(float* host, const float* stage_memory, std::size_t n) const override;
  void copy_from_host(float* stage_memory, const float* host, std::size_t n) const override;
  void fence() const override;
  // Where boundary_buffer() takes its buffers from: reused from one transfer to the next.
  const BufferPool& boundary_pool() const { return *boundary_pool_; }

  MemoryReport memory() const;
  // What memory() would say of a model of these dimensions on a tensor group of `tp_size`,
  // planned as the constructor plans it with nothing allocated: the estimate before start-up
  // (engine/memory_budget) is the start-up report's own accounting.
  static MemoryReport planned_memory(const ModelConfig& config, int B, int T,
                                     const StageSpec& stage, int tp_size, int slots,
                                     Backward backward, Precision precision);
  // The stored buffers of `slot` that only matrix products read: after its forward, the
  // activations (both LayerNorm outputs, q, k, v, the attention and GELU outputs, the final
  // LayerNorm's); while its weight gradients are due (split backward), also the output
  // gradients kept for them. In bf16 they hold bf16 values (tests check it).
  std::vector<Span<const float>> product_operands(int slot) const;
  // This rank's share of the squared global gradient norm: split tensors in full, replicated
  // ones only on tensor-parallel rank 0 (they are equal on every rank), and not the tied copy
  // of wte a head-only stage holds (the first stage counts it). Sum it over tp and pp.
  double grad_sum_of_squares() const override;
  // Whether parameter `index` of the table counts in that sum on this rank.
  bool counts_in_norm(int index) const;
  // Seconds spent in tensor-parallel all-reduces since construction.
  double comm_seconds() const override { return comm_seconds_; }

private:
  // One block's activations of one micro-batch. N = B x T rows; C the width, Cl = C / tp the
  // local width of the split layers (this rank's heads, its quarter of the MLP).
  struct BlockActs {
    float* ln1 = nullptr;      // [N, C] first LayerNorm's output
    float* ln1_mean = nullptr; // [N]
    float* ln1_rstd = nullptr; // [N]
    float* qkv = nullptr;      // [N, 3 Cl] this rank's q, k, v
    float* atty = nullptr;     // [N, Cl] attention output, heads side by side
    float* res2 = nullptr;     // [N, C] residual after attention
    float* ln2 = nullptr;      // [N, C] second LayerNorm's output
    float* ln2_mean = nullptr; // [N]
    float* ln2_rstd = nullptr; // [N]
    float* fch = nullptr;      // [N, 4 Cl] MLP-in output
    float* fch_gelu = nullptr; // [N, 4 Cl] after GELU
    float* res3 = nullptr;     // [N, C] residual after the MLP: the block's output
    AttentionSaved attn;       // per-head q, k, v [B, NH/tp, T, hs] and packed scores
    // Split backward only: output gradients kept from B for W.
    float* d_res3 = nullptr; // [N, C] of the MLP projection
    float* d_fch = nullptr;  // [N, 4 Cl] of MLP-in
    float* d_res2 = nullptr; // [N, C] of the attention projection
    float* d_qkv = nullptr;  // [N, 3 Cl] of the QKV projection
  };
  // Everything one micro-batch keeps from its forward to its backward. Vl: this rank's
  // vocabulary rows (padded).
  struct Slot {
    float* encoded = nullptr;    // [N, C] embedding output, or the previous stage's output
    float* lnf = nullptr;        // [N, C] final LayerNorm's output (head stage)
    float* lnf_mean = nullptr;   // [N]
    float* lnf_rstd = nullptr;   // [N]
    float* logits = nullptr;     // [N, Vl]; their gradient after the backward
    float* losses = nullptr;     // [N] per-position loss
    float* ce_scratch = nullptr; // [3 N] the loss's row max, sum and target logit
    std::vector<BlockActs> blocks;
    Kokkos::View<std::int32_t*> tokens, targets; // [N] each
    Kokkos::View<std::int32_t*> token_links;     // [2N] same_token_links (GPU, embedding)
    bool have_forward = false;
    bool pending_weights = false; // backward_input done, backward_weights not yet
  };
  // The checks, the parameter table and the buffer plan, counted, without allocating.
  struct PlanOnly {};
  GPT(PlanOnly, const ModelConfig& config, int B, int T, const StageSpec& stage, int tp_rank,
      int tp_size, int slots, Backward backward, Precision precision);
  // The parameters, zeroed (or left to load, without `training`), the gradients when
  // `training`, the slots' ids and the carved buffers.
  void allocate(bool training);
  Slot& slot_at(int slot);
  void check_shape(int B, int T) const;
  // Backward::split defers the weight gradients to backward_weights().
  void backward_impl(float loss_weight, const float* doutput, int slot, Backward half);
  void tp_sum(float* data, long n); // all-reduce over the tensor group, timed
  void plan_buffers(bool carve);    // their sizes; carve: acts_, scratch_, pointers into them
  void plan_norm_chunks();          // norm_chunks_ from the table (GPU builds)
  // Tells the hook that gradients from parameter `index` to the end of the buffer are done.
  void grads_done_from(int index) const;
  // Tells the hook that the forward is about to read parameters `indices`.
  void params_needed(std::initializer_list<int> indices) const;
  VocabSlice vocab_slice(); // its all-reduces timed into comm_seconds_
  // Parameter `index` as a matrix product reads it: itself in fp32; in bf16 its rounding, in a
  // scratch that the next call overwrites.
  const float* weight(int index);
  // `data` [n], a buffer that only products read from now on, as they read it: rounded in
  // place in bf16, as it is in fp32.
  float* stored_operand(float* data, long n);
  // The residual gradient d_res_ as a product reads it: in bf16 rounded into d_res_bf16_, since
  // the backward goes on adding to d_res_ itself.
  const float* residual_grad_operand();
  // The embedding (or `input`) and the blocks of a micro-batch into `sl`; returns the last
  // block's output [B*T, C].
  const float* forward_trunk(Slot& sl, const std::int32_t* tokens, const float* input, int B,
                             int T);
  // One block's forward for the micro-batch of its activations `a`, from `residual` [N, C].
  void block_forward(BlockActs& a, const BlockParams& p, const float* residual);

  ModelConfig config_;
  StageSpec stage_;
  parallel::Comm* tp_ = nullptr;
  int tp_size_ = 1; // tensor-parallel group size
  bool split_ = false;
  Precision precision_ = Precision::fp32;
  double comm_seconds_ = 0.0;
  GradsDone grads_done_;
  ParamsNeeded params_needed_;
  ParamTable table_;
  int B_ = 0, T_ = 0;
  Kokkos::View<float*> params_, grads_; // [table_.total] each
  // [2 x chunks] begin and end in grads_ of 1024-element chunks of the tensors that count in
  // the gradient norm (GPU builds: one launch for the norm).
  Kokkos::View<long*> norm_chunks_;
  Kokkos::View<float*> acts_;                        // every slot's activations, one allocation
  Kokkos::View<float*> scratch_;                     // backward temporaries, one allocation
  std::size_t acts_floats_ = 0, scratch_floats_ = 0; // their sizes, planned
  std::vector<Slot> slots_;
  // Backward temporaries, shared by the slots.
  float* d_res_ = nullptr;  // [N, C] gradient of the residual stream
  float* d_ln_ = nullptr;   // [N, C] of a LayerNorm's output
  float* d_qkv_ = nullptr;  // [N, 3 Cl]
  float* d_atty_ = nullptr; // [N, Cl]
  float* d_fch_ = nullptr;  // [N, 4 Cl]
  float* d_fchg_ = nullptr; // [N, 4 Cl]
  AttentionScratch attn_scratch_{};
  // bf16 only (null in fp32).
  float* weight_bf16_ = nullptr; // [largest weight matrix] the rounded weight of one product
  float* d_res_bf16_ = nullptr;  // [N, C] the rounded residual gradient
  std::shared_ptr<BufferPool> boundary_pool_; // [B, T, C] each: the pipeline's transfers
};

} // namespace gridlm::layers
