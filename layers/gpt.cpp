// GPT forward and backward over the layer kernels, llm.c-style: one pass of calls per block,
// the backward walking the same calls in reverse.
#include "layers/gpt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "layers/adamw.hpp"
#include "layers/crossentropy.hpp"
#include "layers/encoder.hpp"
#include "layers/gelu.hpp"
#include "layers/kernels.hpp"
#include "layers/layernorm.hpp"
#include "layers/linear.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::layers {
namespace {

// out[N,C] += bias[C] + residual[N,C]: after a row-parallel layer's all-reduce.
void add_bias_residual(float* out, const float* bias, const float* residual, long N, int C) {
  for_each_element(
      "layers::Residual::forward", N, C,
      KOKKOS_LAMBDA(long n, long i) { out[n * C + i] += bias[i] + residual[n * C + i]; });
}

using HostTokens =
    Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Token or target ids [N] must lie in the vocabulary of V.
void check_ids(const std::int32_t* ids, long N, int V, const char* what) {
  for (long i = 0; i < N; ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      throw Error(fmt::format("{} id {} at position {} is outside the vocabulary of {}", what,
                              ids[i], i, V));
    }
  }
}

} // namespace

void GPT::check_shape(int B, int T) const {
  if (B != B_ || T != T_) {
    throw Error(fmt::format("a step of {} x {} tokens was given to a model planned for "
                            "micro-batches of {} x {}; activations are sized once at start-up",
                            B, T, B_, T_));
  }
}

double GPT::forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                    float* logits_out) {
  if (!stage_.embedding || !stage_.head) {
    throw Error("GPT::forward needs the whole model; a pipeline stage uses forward_stage");
  }
  return forward_stage(tokens, nullptr, targets, B, T, logits_out);
}

std::vector<float> GPT::host_param(int index) const {
  return shard_to_host(params_, table_.params.at(std::size_t(index)));
}

std::vector<float> GPT::host_grad(int index) const {
  return shard_to_host(grads_, table_.params.at(std::size_t(index)));
}

const float* GPT::output(int slot) const {
  const Slot& sl = slots_.at(std::size_t(slot));
  return sl.blocks.empty() ? sl.encoded : sl.blocks.back().res3;
}

GPT::Slot& GPT::slot_at(int slot) {
  if (slot < 0 || slot >= int(slots_.size())) {
    throw Error(fmt::format("activation slot {} of a model planned with {}", slot, slots_.size()));
  }
  return slots_[std::size_t(slot)];
}

const float* GPT::forward_trunk(Slot& sl, const std::int32_t* tokens, const float* input, int B,
                                int T) {
  check_shape(B, T);
  const int C = config_.d_model, V = config_.vocab_size;
  const long N = long(B) * T, Vl = table_.vocab_local;
  const ParamTable& t = table_;
  if (stage_.embedding) {
    check_ids(tokens, N, V, "token");
    params_needed({t.wte, t.wpe});
    if (sl.token_links.size() > 0) {
      // The embedding's backward on a GPU walks each token's positions (encoder.hpp); made
      // before the tokens' copy waits for the device, so the host works while the GPU does.
      std::vector<std::int32_t> links(2 * std::size_t(N));
      same_token_links(links.data(), tokens, N, V);
      Kokkos::deep_copy(sl.token_links, HostTokens(links.data(), links.size()));
    }
    Kokkos::deep_copy(sl.tokens, HostTokens(tokens, N));
    // Vocabulary-parallel lookup: each rank its rows, zeros elsewhere, summed over the group.
    token_embedding_forward(sl.encoded, sl.tokens.data(), param(t.wte), B, T, C, t.vocab_begin, Vl);
    tp_sum(sl.encoded, N * C);
    position_embedding_forward(sl.encoded, param(t.wpe), B, T, C);
  } else {
    copy(sl.encoded, input, N * C);
  }
  const float* residual = sl.encoded;
  for (std::size_t l = 0; l < sl.blocks.size(); ++l) {
    block_forward(sl.blocks[l], t.blocks[l], residual);
    residual = sl.blocks[l].res3;
  }
  sl.have_forward = true;
  return residual;
}

double GPT::forward_stage(const std::int32_t* tokens, const float* input,
                          const std::int32_t* targets, int B, int T, float* logits_out, int slot) {
  Slot& sl = slot_at(slot);
  if (sl.pending_weights) {
    throw Error(fmt::format("activation slot {} still holds a micro-batch whose weight "
                            "gradients (backward_weights) are not done",
                            slot));
  }
  const float* residual = forward_trunk(sl, tokens, input, B, T);
  if (!stage_.head) return 0.0;
  const int C = config_.d_model, V = config_.vocab_size;
  const long N = long(B) * T, Vl = table_.vocab_local;
  const ParamTable& t = table_;
  check_ids(targets, N, V, "target");
  Kokkos::deep_copy(sl.targets, HostTokens(targets, N));
  params_needed({t.lnf_w, t.lnf_b, t.lm_head});
  layernorm_forward(sl.lnf, sl.lnf_mean, sl.lnf_rstd, residual, param(t.lnf_w), param(t.lnf_b), N,
                    C);
  stored_operand(sl.lnf, N * C);
  // Vocabulary-parallel head: this rank's logit columns; the loss reduces three numbers a row.
  linear_forward(sl.logits, sl.lnf, weight(t.lm_head), nullptr, N, C, int(Vl), precision_);
  if (logits_out != nullptr) {
    if (tp_size_ != 1)
      throw Error("logits can only be copied out of a model that is not tensor-split");
    // Real vocabulary columns only: each row of sl.logits holds Vl >= V columns. The padded
    // block crosses to the host in one copy (none on a CPU, where the mirror is the memory
    // itself): a copy per row would wait for the device N times.
    const Kokkos::View<float*, Kokkos::MemoryTraits<Kokkos::Unmanaged>> padded(sl.logits,
                                                                               std::size_t(N * Vl));
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), padded);
    for (long n = 0; n < N; ++n)
      std::copy_n(host.data() + n * Vl, V, logits_out + n * V);
  }
  return crossentropy_forward(sl.logits, sl.losses, sl.ce_scratch, sl.targets.data(), N,
                              vocab_slice());
}

void GPT::next_token_logits(const std::int32_t* tokens, int position, float* logits_out) {
  if (!stage_.embedding || !stage_.head || tp_size_ != 1 || B_ != 1) {
    throw Error("GPT::next_token_logits needs the whole, unsplit model planned for one sequence");
  }
  if (position < 0 || position >= T_) {
    throw Error(fmt::format("position {} is outside the sequence of {}", position, T_));
  }
  Slot& sl = slot_at(0);
  if (sl.pending_weights) {
    throw Error("activation slot 0 still holds a micro-batch whose weight gradients are not done");
  }
  const int C = config_.d_model, V = config_.vocab_size;
  const long Vl = table_.vocab_local;
  const ParamTable& t = table_;
  const float* residual = forward_trunk(sl, tokens, nullptr, 1, T_) + long(position) * C;
  // The head of one row: the final LayerNorm and the logits of `position` alone, no loss. The
  // head over every row was most of a token's time for a large vocabulary, and no one read it.
  params_needed({t.lnf_w, t.lnf_b, t.lm_head});
  layernorm_forward(sl.lnf, sl.lnf_mean, sl.lnf_rstd, residual, param(t.lnf_w), param(t.lnf_b), 1,
                    C);
  stored_operand(sl.lnf, C);
  linear_forward(sl.logits, sl.lnf, weight(t.lm_head), nullptr, 1, C, int(Vl), precision_);
  sl.have_forward = false; // the slot holds no whole forward that a backward could use
  const Kokkos::View<float*, Kokkos::MemoryTraits<Kokkos::Unmanaged>> row(sl.logits,
                                                                          std::size_t(V));
  Kokkos::deep_copy(
      Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          logits_out, std::size_t(V)),
      row);
}

void GPT::block_forward(BlockActs& a, const BlockParams& p, const float* residual) {
  const int B = B_, T = T_, C = config_.d_model, Cl = C / tp_size_, NH = config_.n_head / tp_size_;
  const long N = long(B) * T;
  params_needed({p.ln1_w, p.ln1_b, p.qkv_w, p.qkv_b, p.attproj_w, p.attproj_b, p.ln2_w, p.ln2_b,
                 p.fc_w, p.fc_b, p.fcproj_w, p.fcproj_b});
  layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, residual, param(p.ln1_w), param(p.ln1_b), N, C);
  // Column-parallel QKV: this rank's heads only.
  linear_forward(a.qkv, stored_operand(a.ln1, N * C), weight(p.qkv_w), param(p.qkv_b), N, C, 3 * Cl,
                 precision_);
  attention_forward(a.atty, a.attn, attn_scratch_, a.qkv, B, T, Cl, NH, precision_);
  // Row-parallel projection: partial sums, all-reduced, then bias and residual once.
  linear_forward(a.res2, stored_operand(a.atty, N * Cl), weight(p.attproj_w), nullptr, N, Cl, C,
                 precision_);
  tp_sum(a.res2, N * C);
  add_bias_residual(a.res2, param(p.attproj_b), residual, N, C);
  layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, param(p.ln2_w), param(p.ln2_b), N, C);
  linear_forward(a.fch, stored_operand(a.ln2, N * C), weight(p.fc_w), param(p.fc_b), N, C, 4 * Cl,
                 precision_);
  gelu_forward(a.fch_gelu, a.fch, N * 4 * Cl);
  linear_forward(a.res3, stored_operand(a.fch_gelu, N * 4 * Cl), weight(p.fcproj_w), nullptr, N,
                 4 * Cl, C, precision_);
  tp_sum(a.res3, N * C);
  add_bias_residual(a.res3, param(p.fcproj_b), a.res2, N, C);
}

void GPT::backward(float loss_weight, const float* doutput, int slot) {
  backward_impl(loss_weight, doutput, slot, Backward::fused);
}

void GPT::backward_input(float loss_weight, const float* doutput, int slot) {
  if (!split_) throw Error("GPT::backward_input needs a model planned with Backward::split");
  backward_impl(loss_weight, doutput, slot, Backward::split);
}

void GPT::backward_impl(float loss_weight, const float* doutput, int slot, Backward half) {
  const bool defer = half == Backward::split;
  Slot& sl = slot_at(slot);
  if (!sl.have_forward) {
    throw Error("GPT::backward called without a forward of the same micro-batch slot");
  }
  if (sl.pending_weights) {
    throw Error("GPT::backward: the slot's weight gradients (backward_weights) are still due");
  }
  if (!stage_.head && doutput == nullptr) {
    throw Error("GPT::backward of a stage without the head needs the gradient of its output");
  }
  sl.have_forward = false;
  sl.pending_weights = defer;
  const int B = B_, T = T_, C = config_.d_model, Cl = C / tp_size_, NH = config_.n_head / tp_size_;
  const long N = long(B) * T, Vl = table_.vocab_local;
  const ParamTable& t = table_;
  // A linear layer's backward: both halves now, or the input half now and the output gradient
  // kept in `saved` (when it is not already kept) for backward_weights().
  auto linear = [&](float* dinp, int w, int bias, const float* dout, float* saved, const float* inp,
                    int in, int out) {
    linear_backward_input(dinp, dout, weight(w), N, in, out, GradWrite::overwrite, precision_);
    if (!defer) {
      linear_backward_weight(grad(w), bias < 0 ? nullptr : grad(bias), dout, inp, N, in, out,
                             precision_);
    } else if (saved != nullptr && saved != dout) {
      copy(saved, dout, N * out);
    }
  };

  if (stage_.head) {
    // The logits buffer becomes their gradient, kept in the slot until the weights are done;
    // in bf16 the backward leaves it rounded (only the head's products read it).
    crossentropy_backward(sl.logits, sl.ce_scratch, sl.targets.data(), loss_weight / float(N), N,
                          vocab_slice(), precision_);
    linear(d_ln_, t.lm_head, -1, sl.logits, nullptr, sl.lnf, C, int(Vl));
    tp_sum(d_ln_, N * C); // conjugate of the head's replicated input
    fill_zero(d_res_, N * C);
    layernorm_backward(d_res_, grad(t.lnf_w), grad(t.lnf_b), d_ln_, output(slot), param(t.lnf_w),
                       sl.lnf_mean, sl.lnf_rstd, N, C);
    if (!defer) grads_done_from(t.lnf_w);
  } else {
    copy(d_res_, doutput, N * C);
  }
  for (int l = int(sl.blocks.size()) - 1; l >= 0; --l) {
    const BlockParams& p = t.blocks[l];
    const BlockActs& a = sl.blocks[l];
    const float* residual = l == 0 ? sl.encoded : sl.blocks[l - 1].res3;
    // d_res holds d res3; res3 = res2 + mlp(ln2(res2)). Activation-gradient buffers are
    // written once each: overwrite instead of zero + add. The row-parallel layers take the
    // replicated d_res as it is; the column-parallel ones give partial input gradients that
    // are summed over the group (the two backward all-reduces of a block).
    float* d_fch = defer ? a.d_fch : d_fch_;
    float* d_qkv = defer ? a.d_qkv : d_qkv_;
    linear(d_fchg_, p.fcproj_w, p.fcproj_b, residual_grad_operand(), a.d_res3, a.fch_gelu, 4 * Cl,
           C);
    gelu_backward(d_fch, a.fch, d_fchg_, N * 4 * Cl, GradWrite::overwrite);
    linear(d_ln_, p.fc_w, p.fc_b, stored_operand(d_fch, N * 4 * Cl), d_fch, a.ln2, C, 4 * Cl);
    tp_sum(d_ln_, N * C);
    layernorm_backward(d_res_, grad(p.ln2_w), grad(p.ln2_b), d_ln_, a.res2, param(p.ln2_w),
                       a.ln2_mean, a.ln2_rstd, N, C);
    // d_res now holds d res2; res2 = residual + attn(ln1(residual)).
    linear(d_atty_, p.attproj_w, p.attproj_b, residual_grad_operand(), a.d_res2, a.atty, Cl, C);
    attention_backward(d_qkv, attn_scratch_, d_atty_, a.attn, B, T, Cl, NH, GradWrite::overwrite,
                       precision_);
    linear(d_ln_, p.qkv_w, p.qkv_b, stored_operand(d_qkv, N * 3 * Cl), d_qkv, a.ln1, C, 3 * Cl);
    tp_sum(d_ln_, N * C);
    layernorm_backward(d_res_, grad(p.ln1_w), grad(p.ln1_b), d_ln_, residual, param(p.ln1_w),
                       a.ln1_mean, a.ln1_rstd, N, C);
    if (!defer) grads_done_from(p.ln1_w);
  }
  // d_res holds the gradient of the stage input: the embedding's, or the previous stage's.
  if (stage_.embedding) {
    token_embedding_backward(grad(t.wte), d_res_, sl.tokens.data(), B, T, C, t.vocab_begin, Vl,
                             sl.token_links.size() > 0 ? sl.token_links.data() : nullptr);
    position_embedding_backward(grad(t.wpe), d_res_, B, T, C);
  }
}

void GPT::backward_weights(int slot) {
  Slot& sl = slot_at(slot);
  if (!sl.pending_weights) {
    throw Error("GPT::backward_weights called without a backward_input of the same slot");
  }
  sl.pending_weights = false;
  const int C = config_.d_model, Cl = C / tp_size_;
  const long N = long(B_) * T_;
  const ParamTable& t = table_;
  if (stage_.head) {
    linear_backward_weight(grad(t.lm_head), nullptr, sl.logits, sl.lnf, N, C,
                           int(table_.vocab_local), precision_);
    grads_done_from(t.lnf_w); // the final LayerNorm's were done by backward_input
  }
  for (int l = int(sl.blocks.size()) - 1; l >= 0; --l) {
    const BlockParams& p = t.blocks[l];
    const BlockActs& a = sl.blocks[l];
    linear_backward_weight(grad(p.fcproj_w), grad(p.fcproj_b), a.d_res3, a.fch_gelu, N, 4 * Cl, C,
                           precision_);
    linear_backward_weight(grad(p.fc_w), grad(p.fc_b), a.d_fch, a.ln2, N, C, 4 * Cl, precision_);
    linear_backward_weight(grad(p.attproj_w), grad(p.attproj_b), a.d_res2, a.atty, N, Cl, C,
                           precision_);
    linear_backward_weight(grad(p.qkv_w), grad(p.qkv_b), a.d_qkv, a.ln1, N, C, 3 * Cl, precision_);
    grads_done_from(p.ln1_w);
  }
}

void GPT::params_needed(std::initializer_list<int> indices) const {
  if (!params_needed_) return;
  std::size_t until = 0;
  for (int i : indices) {
    const ParamInfo& p = table_.params[std::size_t(i)];
    until = std::max(until, p.offset + p.size);
  }
  params_needed_(until);
}

void GPT::grads_done_from(int index) const {
  if (grads_done_) grads_done_(table_.params[std::size_t(index)].offset);
}

VocabSlice GPT::vocab_slice() {
  return VocabSlice{table_.vocab_begin, table_.vocab_local, config_.vocab_size,
                    tp_size_ > 1 ? tp_ : nullptr, &comm_seconds_};
}

void GPT::tp_sum(float* data, long n) {
  if (tp_size_ == 1) return;
  // MPI has no stream to wait on: the kernels that wrote `data` must be done before it reads
  // it (NCCL waits on Kokkos' stream by itself, and the host waits for the sum anyway). Before
  // the clock starts: their time is computation, not communication.
  fence();
  const auto t0 = std::chrono::steady_clock::now();
  tp_->all_reduce(Span<float>(data, std::size_t(n)));
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double GPT::grad_sum_of_squares() const {
  // A GPU: every counted tensor in one launch and one wait, not one of each per tensor.
  if constexpr (!host_teams) return sum_of_squares(grads_.data(), norm_chunks_);
  double total = 0.0;
  for (std::size_t i = 0; i < table_.params.size(); ++i) {
    const ParamInfo& p = table_.params[i];
    if (!counts_in_norm(int(i))) continue;
    total += sum_of_squares(Kokkos::View<const float*, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
        grads_.data() + p.offset, p.size));
  }
  return total;
}

bool GPT::counts_in_norm(int index) const {
  const ParamInfo& p = table_.params[std::size_t(index)];
  if (p.split == TpSplit::replicated && table_.tp_rank != 0) return false;
  return index != table_.wte || stage_.embedding; // the first stage counts a tied copy
}

void GPT::zero_grad() { Kokkos::deep_copy(grads_, 0.0f); }

std::size_t GPT::boundary_size() const {
  return std::size_t(B_) * std::size_t(T_) * std::size_t(config_.d_model);
}

double GPT::forward_micro(int slot, const std::int32_t* tokens, const float* input,
                          const std::int32_t* targets) {
  return forward_stage(tokens, input, targets, B_, T_, nullptr, slot);
}

std::size_t GPT::tied_embedding_size() const {
  if (!config_.tied_embeddings) return 0;
  return std::size_t(padded_vocab_slice(config_.vocab_size, tp_size_) * config_.d_model);
}

Span<float> GPT::tied_embedding_grad() {
  if (!config_.tied_embeddings || table_.wte < 0) return {};
  return Span<float>(grad(table_.wte), tied_embedding_size());
}

parallel::Stage::Buffer GPT::boundary_buffer() const { return boundary_pool_->take(); }

void GPT::copy_boundary(float* to, const float* from) const {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::deep_copy(Kokkos::View<float*, Unmanaged>(to, boundary_size()),
                    Kokkos::View<const float*, Unmanaged>(from, boundary_size()));
}

void GPT::copy_to_host(float* host, const float* stage_memory, std::size_t n) const {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>(host, n),
                    Kokkos::View<const float*, Unmanaged>(stage_memory, n));
}

void GPT::copy_from_host(float* stage_memory, const float* host, std::size_t n) const {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::deep_copy(Kokkos::View<float*, Unmanaged>(stage_memory, n),
                    Kokkos::View<const float*, Kokkos::HostSpace, Unmanaged>(host, n));
}

// Kokkos' own stream only: a global fence (cudaDeviceSynchronize) would also wait for the
// NCCL streams, and so for every bucket still being reduced behind the backward.
void GPT::fence() const { Kokkos::DefaultExecutionSpace().fence(); }

const float* GPT::weight(int index) {
  if (precision_ == Precision::fp32) return param(index);
  const long n = long(table_.params[std::size_t(index)].size);
  round_to_bf16(weight_bf16_, param(index), n);
  return weight_bf16_;
}

float* GPT::stored_operand(float* data, long n) {
  if (precision_ == Precision::bf16) round_to_bf16(data, n);
  return data;
}

const float* GPT::residual_grad_operand() {
  if (precision_ == Precision::fp32) return d_res_;
  round_to_bf16(d_res_bf16_, d_res_, long(B_) * T_ * config_.d_model);
  return d_res_bf16_;
}

std::vector<Span<const float>> GPT::product_operands(int slot) const {
  const Slot& sl = slots_.at(std::size_t(slot));
  const std::size_t N = std::size_t(B_) * T_, C = config_.d_model, Cl = C / tp_size_;
  std::vector<Span<const float>> out;
  const auto add = [&](const float* p, std::size_t n) { out.emplace_back(p, n); };
  for (const BlockActs& a : sl.blocks) {
    for (const float* p : {a.ln1, a.ln2})
      add(p, N * C);
    for (const float* p : {a.attn.q, a.attn.k, a.attn.v, a.atty})
      add(p, N * Cl);
    add(a.fch_gelu, N * 4 * Cl);
    if (sl.pending_weights) {
      add(a.d_res3, N * C);
      add(a.d_fch, N * 4 * Cl);
      add(a.d_res2, N * C);
      add(a.d_qkv, N * 3 * Cl);
    }
  }
  if (stage_.head) {
    add(sl.lnf, N * C);
    if (sl.pending_weights) add(sl.logits, N * table_.vocab_local);
  }
  return out;
}

} // namespace gridlm::layers
