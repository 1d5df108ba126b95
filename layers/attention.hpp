// Causal multi-head self-attention on a fused QKV activation. Forward and backward side by side.
// Heads are split into contiguous per-head matrices. The causal score matrix is computed in row
// blocks of attention_block rows: block r needs only the keys up to its last row, so the GEMMs
// skip most of the masked upper triangle (10/16 of the full work at 4 blocks). Each block's
// scores are stored packed, [rows x keys] contiguous, so every GEMM operand is contiguous. A
// block's products for several heads go in one batched GEMM, its softmax in one launch.
#pragma once

#include <cstddef>

#include "layers/kernels.hpp"

namespace gridlm::layers {

constexpr int attention_block = 32; // query rows per causal block

// Floats of one head's packed causal score matrix for sequence length T.
std::size_t attention_scores_per_head(int T);

// Saved by the forward for the backward.
struct AttentionSaved {
  float* q;   // [B,NH,T,hs]
  float* k;   // [B,NH,T,hs]
  float* v;   // [B,NH,T,hs]
  float* att; // [B,NH, attention_scores_per_head(T)] softmax probabilities, 0 above the diagonal
};

// Scratch used inside forward and backward; contents are not kept.
struct AttentionScratch {
  float* yh;              // [B,NH,T,hs] per-head outputs / output gradients
  float* datt;            // [heads_at_once, attention_block, T] one block's score gradients
  float* dq;              // [B,NH,T,hs]
  float* dk;              // [B,NH,T,hs]
  float* dv;              // [B,NH,T,hs]
  long heads_at_once = 1; // (sequence, head) pairs whose blocks go in one launch
};

// How many (sequence, head) pairs of `heads` one launch should take: all of them on a GPU, where
// a launch per head and block would leave it idle; one on a CPU, whose caches hold one head's
// block between its products and its softmax.
long attention_heads_per_launch(long heads);

// out[B,T,C] = attention(qkv[B,T,3C]) with qkv = [q | k | v], C = NH * hs.
// In bf16 (see Precision) the saved q, k and v are stored rounded, and the probabilities are
// rounded for the product with v (they are kept in fp32 for the backward).
void attention_forward(float* out, AttentionSaved saved, AttentionScratch scratch, const float* qkv,
                       int B, int T, int C, int NH, Precision precision = Precision::fp32);
// dqkv[B,T,3C] += d attention / d qkv applied to dout[B,T,C] (with GradWrite::overwrite:
// dqkv = ...).
void attention_backward(float* dqkv, AttentionScratch scratch, const float* dout,
                        AttentionSaved saved, int B, int T, int C, int NH,
                        GradWrite write = GradWrite::accumulate,
                        Precision precision = Precision::fp32);

} // namespace gridlm::layers
