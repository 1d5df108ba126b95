// Attention kernels: head split/merge and masked softmax in Kokkos, score and output products as
// GEMMs per (batch, head, causal row block).
#include "layers/attention.hpp"

#include <cmath>

#include "layers/fast_math.hpp"
#include "layers/kernels.hpp"

namespace gridlm::layers {
namespace {

// Row block r: query rows [r0, r1), keys [0, r1), scores at `offset` in the packed matrix.
struct Block {
  long r0, r1, offset;
};

// How merged gradients meet the buffer: functors, so device lambdas can call them.
struct Assign {
  KOKKOS_INLINE_FUNCTION void operator()(float& to, float from) const { to = from; }
};
struct Accumulate {
  KOKKOS_INLINE_FUNCTION void operator()(float& to, float from) const { to += from; }
};

long num_blocks(int T) { return (T + attention_block - 1) / attention_block; }

Block block(int T, long r) {
  const long r0 = r * attention_block;
  const long r1 = r0 + attention_block < T ? r0 + attention_block : T;
  // Blocks before r are full: sum over i < r of attention_block * (i + 1) * attention_block.
  const long offset = long(attention_block) * attention_block * r * (r + 1) / 2;
  return {r0, r1, offset};
}

// Head-major copy: dst[B,NH,T,hs] = columns [col, col + C) of src rows [B*T, row_stride].
void to_heads(float* dst, const float* src, long row_stride, long col, int B, int T, int NH,
              int hs) {
  for_each(
      "layers::Attention::to_heads", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long b = bt / T, t = bt % T;
        const float* row = src + bt * row_stride + col;
        for (int h = 0; h < NH; ++h) {
          float* out = dst + ((b * NH + h) * T + t) * hs;
          for (int d = 0; d < hs; ++d)
            out[d] = row[h * hs + d];
        }
      });
}

// The inverse: columns [col, col + C) of dst rows get src[B,NH,T,hs], through `combine`.
template <class Combine>
void from_heads(float* dst, const float* src, long row_stride, long col, int B, int T, int NH,
                int hs, Combine combine) {
  for_each(
      "layers::Attention::from_heads", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long b = bt / T, t = bt % T;
        float* row = dst + bt * row_stride + col;
        for (int h = 0; h < NH; ++h) {
          const float* in = src + ((b * NH + h) * T + t) * hs;
          for (int d = 0; d < hs; ++d)
            combine(row[h * hs + d], in[d]);
        }
      });
}

// One block's probabilities a [n] as their products read them: themselves in fp32; in bf16
// rounded into `scratch` (they stay fp32 for the softmax backward).
const float* probabilities_operand(float* scratch, const float* a, long n, bool bf16) {
  if (!bf16) return a;
  round_to_bf16(scratch, a, n);
  return scratch;
}

} // namespace

std::size_t attention_scores_per_head(int T) {
  const Block last = block(T, num_blocks(T) - 1);
  return std::size_t(last.offset + (last.r1 - last.r0) * last.r1);
}

void attention_forward(float* out, AttentionSaved saved, AttentionScratch scratch, const float* qkv,
                       int B, int T, int C, int NH, Precision precision) {
  const bool bf16 = precision == Precision::bf16;
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  float* q = saved.q;
  float* k = saved.k;
  float* v = saved.v;
  float* yh = scratch.yh;
  to_heads(q, qkv, 3 * C, 0, B, T, NH, hs);
  to_heads(k, qkv, 3 * C, C, B, T, NH, hs);
  to_heads(v, qkv, 3 * C, 2 * C, B, T, NH, hs);
  if (bf16) {
    for (float* x : {q, k, v})
      round_to_bf16(x, long(B) * NH * T * hs);
  }
  const long head = long(T) * hs, per_head = long(attention_scores_per_head(T));
  for (long bh = 0; bh < long(B) * NH; ++bh) {
    for (long r = 0; r < num_blocks(T); ++r) {
      const Block blk = block(T, r);
      const long rows = blk.r1 - blk.r0, keys = blk.r1;
      float* a = saved.att + bh * per_head + blk.offset; // [rows, keys]
      matmul(a, q + bh * head + blk.r0 * hs, Transpose::no, k + bh * head, Transpose::yes, rows,
             keys, hs, scale, 0.0f);
      const long r0 = blk.r0;
      for_each(
          "layers::Attention::causal_softmax", rows, KOKKOS_LAMBDA(long i) {
            const long t = r0 + i; // keys 0..t are visible
            float* ar = a + i * keys;
            float mx = ar[0];
            for (long j = 1; j <= t; ++j)
              mx = ar[j] > mx ? ar[j] : mx;
            float sum = 0.0f;
            for (long j = 0; j <= t; ++j) {
              ar[j] = fast_exp(ar[j] - mx);
              sum += ar[j];
            }
            const float inv = 1.0f / sum;
            for (long j = 0; j <= t; ++j)
              ar[j] *= inv;
            for (long j = t + 1; j < keys; ++j)
              ar[j] = 0.0f;
          });
      const float* p = probabilities_operand(scratch.datt, a, rows * keys, bf16);
      matmul(yh + bh * head + blk.r0 * hs, p, Transpose::no, v + bh * head, Transpose::no, rows, hs,
             keys, 1.0f, 0.0f);
    }
  }
  from_heads(out, yh, C, 0, B, T, NH, hs, Assign{});
}

void attention_backward(float* dqkv, AttentionScratch scratch, const float* dout,
                        AttentionSaved saved, int B, int T, int C, int NH, GradWrite write,
                        Precision precision) {
  const bool overwrite = write == GradWrite::overwrite, bf16 = precision == Precision::bf16;
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  float* dyh = scratch.yh;
  float* datt = scratch.datt;
  float* dq = scratch.dq;
  float* dk = scratch.dk;
  float* dv = scratch.dv;
  to_heads(dyh, dout, C, 0, B, T, NH, hs);
  if (bf16) round_to_bf16(dyh, long(B) * NH * T * hs);
  const long head = long(T) * hs, per_head = long(attention_scores_per_head(T));
  for (long bh = 0; bh < long(B) * NH; ++bh) {
    // Last block first: it touches every key row, so it initialises dk and dv (beta 0) and the
    // earlier blocks accumulate into their prefixes.
    for (long r = num_blocks(T) - 1; r >= 0; --r) {
      const Block blk = block(T, r);
      const long rows = blk.r1 - blk.r0, keys = blk.r1;
      const bool first = r == num_blocks(T) - 1;
      const float* a = saved.att + bh * per_head + blk.offset; // [rows, keys]
      const float* g = dyh + bh * head + blk.r0 * hs;          // [rows, hs]
      // dv first: in bf16 it reads the rounded probabilities from datt before datt is used.
      const float* p = probabilities_operand(datt, a, rows * keys, bf16);
      matmul(dv + bh * head, p, Transpose::yes, g, Transpose::no, keys, hs, rows, 1.0f,
             first ? 0.0f : 1.0f);
      matmul(datt, g, Transpose::no, saved.v + bh * head, Transpose::yes, rows, keys, hs, 1.0f,
             0.0f);
      const long r0 = blk.r0;
      // Softmax backward in place: dS = att * (datt - rowsum(att * datt)) * scale.
      for_each(
          "layers::Attention::softmax_backward", rows, KOKKOS_LAMBDA(long i) {
            const long t = r0 + i;
            const float* ar = a + i * keys;
            float* dr = datt + i * keys;
            float dot = 0.0f;
            for (long j = 0; j <= t; ++j)
              dot += ar[j] * dr[j];
            for (long j = 0; j <= t; ++j)
              dr[j] = ar[j] * (dr[j] - dot) * scale;
            for (long j = t + 1; j < keys; ++j)
              dr[j] = 0.0f;
          });
      if (bf16) round_to_bf16(datt, rows * keys);
      matmul(dq + bh * head + blk.r0 * hs, datt, Transpose::no, saved.k + bh * head, Transpose::no,
             rows, hs, keys, 1.0f, 0.0f);
      matmul(dk + bh * head, datt, Transpose::yes, saved.q + bh * head + blk.r0 * hs, Transpose::no,
             keys, hs, rows, 1.0f, first ? 0.0f : 1.0f);
    }
  }
  // Two instantiations rather than a select inside one loop, which would keep it scalar.
  for (auto [src, col] : {std::pair{dq, 0}, {dk, C}, {dv, 2 * C}}) {
    if (overwrite) {
      from_heads(dqkv, src, 3 * C, col, B, T, NH, hs, Assign{});
    } else {
      from_heads(dqkv, src, 3 * C, col, B, T, NH, hs, Accumulate{});
    }
  }
}

} // namespace gridlm::layers
