// Causal multi-head self-attention on a fused QKV activation. Forward and backward side by side.
// Heads are split into contiguous per-head matrices so that each head's scores and outputs are
// two GEMMs; the full causal score matrix is computed and masked (simple, GEMM-friendly).
#pragma once

namespace gridlm::layers {

// Saved by the forward for the backward, all [B, NH, T, *] row-major.
struct AttentionSaved {
  float* q;   // [B,NH,T,hs]
  float* k;   // [B,NH,T,hs]
  float* v;   // [B,NH,T,hs]
  float* att; // [B,NH,T,T] softmax probabilities, 0 above the diagonal
};

// Scratch used inside forward and backward; contents are not kept.
struct AttentionScratch {
  float* yh;   // [B,NH,T,hs] per-head outputs / output gradients
  float* datt; // [T,T] one head's score gradients
  float* dq;   // [B,NH,T,hs]
  float* dk;   // [B,NH,T,hs]
  float* dv;   // [B,NH,T,hs]
};

// out[B,T,C] = attention(qkv[B,T,3C]) with qkv = [q | k | v], C = NH * hs.
void attention_forward(float* out, AttentionSaved saved, AttentionScratch scratch, const float* qkv,
                       int B, int T, int C, int NH);
// dqkv[B,T,3C] += d attention / d qkv applied to dout[B,T,C] (with overwrite: dqkv = ...).
void attention_backward(float* dqkv, AttentionScratch scratch, const float* dout,
                        AttentionSaved saved, int B, int T, int C, int NH, bool overwrite = false);

} // namespace gridlm::layers
