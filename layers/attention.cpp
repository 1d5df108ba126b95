// Attention kernels: head split/merge and masked softmax in Kokkos, score and output products as
// GEMMs per (batch, head).
#include "layers/attention.hpp"

#include <cmath>

#include "layers/fast_math.hpp"
#include "layers/kernels.hpp"

namespace gridlm::layers {

void attention_forward(float* out, AttentionSaved saved, AttentionScratch scratch, const float* qkv,
                       int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  float* q = saved.q;
  float* k = saved.k;
  float* v = saved.v;
  float* att = saved.att;
  float* yh = scratch.yh;
  for_each(
      "layers::Attention::split_heads", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long b = bt / T, t = bt % T;
        const float* row = qkv + bt * 3 * C;
        for (int h = 0; h < NH; ++h) {
          const long dst = ((b * NH + h) * T + t) * hs;
          for (int d = 0; d < hs; ++d) {
            q[dst + d] = row[h * hs + d];
            k[dst + d] = row[C + h * hs + d];
            v[dst + d] = row[2 * C + h * hs + d];
          }
        }
      });
  const long head = long(T) * hs, scores = long(T) * T;
  for (long bh = 0; bh < long(B) * NH; ++bh) {
    matmul(att + bh * scores, q + bh * head, false, k + bh * head, true, T, T, hs, scale, 0.0f);
  }
  for_each(
      "layers::Attention::causal_softmax", long(B) * NH * T, KOKKOS_LAMBDA(long row) {
        const long t = row % T;
        float* a = att + row * T;
        float mx = a[0];
        for (long j = 1; j <= t; ++j)
          mx = a[j] > mx ? a[j] : mx;
        float sum = 0.0f;
        for (long j = 0; j <= t; ++j) {
          a[j] = fast_exp(a[j] - mx);
          sum += a[j];
        }
        const float inv = 1.0f / sum;
        for (long j = 0; j <= t; ++j)
          a[j] *= inv;
        for (long j = t + 1; j < T; ++j)
          a[j] = 0.0f;
      });
  for (long bh = 0; bh < long(B) * NH; ++bh) {
    matmul(yh + bh * head, att + bh * scores, false, v + bh * head, false, T, hs, T, 1.0f, 0.0f);
  }
  for_each(
      "layers::Attention::merge_heads", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long b = bt / T, t = bt % T;
        float* o = out + bt * C;
        for (int h = 0; h < NH; ++h) {
          const float* src = yh + ((b * NH + h) * T + t) * hs;
          for (int d = 0; d < hs; ++d)
            o[h * hs + d] = src[d];
        }
      });
}

void attention_backward(float* dqkv, AttentionScratch scratch, const float* dout,
                        AttentionSaved saved, int B, int T, int C, int NH, bool overwrite) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  float* dyh = scratch.yh;
  float* datt = scratch.datt;
  float* dq = scratch.dq;
  float* dk = scratch.dk;
  float* dv = scratch.dv;
  for_each(
      "layers::Attention::split_head_grads", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long b = bt / T, t = bt % T;
        const float* row = dout + bt * C;
        for (int h = 0; h < NH; ++h) {
          float* dst = dyh + ((b * NH + h) * T + t) * hs;
          for (int d = 0; d < hs; ++d)
            dst[d] = row[h * hs + d];
        }
      });
  const long head = long(T) * hs, scores = long(T) * T;
  for (long bh = 0; bh < long(B) * NH; ++bh) {
    const float* a = saved.att + bh * scores;
    const float* g = dyh + bh * head;
    matmul(datt, g, false, saved.v + bh * head, true, T, T, hs, 1.0f, 0.0f);
    matmul(dv + bh * head, a, true, g, false, T, hs, T, 1.0f, 0.0f);
    // Softmax backward in place: dS = att * (datt - rowsum(att * datt)) * scale.
    for_each(
        "layers::Attention::softmax_backward", T, KOKKOS_LAMBDA(long t) {
          const float* ar = a + t * T;
          float* dr = datt + t * T;
          float dot = 0.0f;
          for (long j = 0; j <= t; ++j)
            dot += ar[j] * dr[j];
          for (long j = 0; j <= t; ++j)
            dr[j] = ar[j] * (dr[j] - dot) * scale;
          for (long j = t + 1; j < T; ++j)
            dr[j] = 0.0f;
        });
    matmul(dq + bh * head, datt, false, saved.k + bh * head, false, T, hs, T, 1.0f, 0.0f);
    matmul(dk + bh * head, datt, true, saved.q + bh * head, false, T, hs, T, 1.0f, 0.0f);
  }
  // A select, not 0 * old: an overwritten buffer may hold anything, even NaN.
  for_each(
      "layers::Attention::merge_qkv_grads", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long b = bt / T, t = bt % T;
        float* row = dqkv + bt * 3 * C;
        for (int h = 0; h < NH; ++h) {
          const long src = ((b * NH + h) * T + t) * hs;
          for (int d = 0; d < hs; ++d) {
            float* gq = row + h * hs + d;
            float* gk = gq + C;
            float* gv = gk + C;
            *gq = overwrite ? dq[src + d] : *gq + dq[src + d];
            *gk = overwrite ? dk[src + d] : *gk + dk[src + d];
            *gv = overwrite ? dv[src + d] : *gv + dv[src + d];
          }
        }
      });
}

} // namespace gridlm::layers
