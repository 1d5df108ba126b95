// Attention kernels: head split/merge and masked softmax in Kokkos, score and output products as
// GEMMs per (batch, head, causal row block).
#include "layers/attention.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

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
  // A row per (position, head): its hs values, contiguous on both sides.
  for_each_element(
      "layers::Attention::to_heads", long(B) * T * NH, hs, KOKKOS_LAMBDA(long r, long d) {
        const int ri = int(r), bt = ri / NH, h = ri % NH, b = bt / T, t = bt % T; // 32-bit: cheap
        dst[((long(b) * NH + h) * T + t) * hs + d] = src[long(bt) * row_stride + col + h * hs + d];
      });
}

// The inverse: columns [col, col + C) of dst rows get src[B,NH,T,hs], through `combine`.
template <class Combine>
void from_heads(float* dst, const float* src, long row_stride, long col, int B, int T, int NH,
                int hs, Combine combine) {
  for_each_element(
      "layers::Attention::from_heads", long(B) * T * NH, hs, KOKKOS_LAMBDA(long r, long d) {
        const int ri = int(r), bt = ri / NH, h = ri % NH, b = bt / T, t = bt % T;
        combine(dst[long(bt) * row_stride + col + h * hs + d],
                src[((long(b) * NH + h) * T + t) * hs + d]);
      });
}

// One block's probabilities for g heads, head i's [n] at a + i * stride, as their products
// read them: themselves in fp32 (returned with their stride); in bf16 rounded into `scratch`,
// head after head (they stay fp32 for the softmax backward).
std::pair<const float*, long> probabilities_operand(float* scratch, const float* a, long stride,
                                                    long n, long g, bool bf16) {
  if (!bf16) return {a, stride};
  for_each(
      "layers::Attention::round_probabilities", g * n,
      KOKKOS_LAMBDA(long i) { scratch[i] = round_to_bf16(a[(i / n) * stride + i % n]); });
  return {scratch, n};
}

} // namespace

std::size_t attention_scores_per_head(int T) {
  const Block last = block(T, num_blocks(T) - 1);
  return std::size_t(last.offset + (last.r1 - last.r0) * last.r1);
}

long attention_heads_per_launch(long heads) {
  using Memory = Kokkos::DefaultExecutionSpace::memory_space;
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible ? 1 : heads;
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
  const long heads = long(B) * NH, group = std::max(1L, std::min(heads, scratch.heads_at_once));
  for (long h0 = 0; h0 < heads; h0 += group) {
    const long g = std::min(group, heads - h0);
    for (long r = 0; r < num_blocks(T); ++r) {
      const Block blk = block(T, r);
      const long rows = blk.r1 - blk.r0, keys = blk.r1, r0 = blk.r0;
      float* a = saved.att + h0 * per_head + blk.offset; // g x [rows, keys], per_head apart
      matmul_batched(a, per_head, q + h0 * head + r0 * hs, head, Transpose::no, k + h0 * head, head,
                     Transpose::yes, rows, keys, hs, scale, 0.0f, g, precision);
      for_each_row(
          "layers::Attention::causal_softmax", g * rows, KOKKOS_LAMBDA(const Team& team) {
            const long gi = team.league_rank(), i = gi % rows, t = r0 + i; // keys 0..t visible
            float* ar = a + (gi / rows) * per_head + i * keys;
            const float mx = team_max(team, ar, t + 1, -3.0e38f);
            const float sum =
                team_sum(team, t + 1, [&](long j) { return ar[j] = fast_exp(ar[j] - mx); });
            const float inv = 1.0f / sum;
            team_for(team, t + 1, [&](long j) { ar[j] *= inv; });
            team_for(team, keys - t - 1, [&](long j) { ar[t + 1 + j] = 0.0f; });
          });
      const auto [p, p_stride] =
          probabilities_operand(scratch.datt, a, per_head, rows * keys, g, bf16);
      matmul_batched(yh + h0 * head + r0 * hs, head, p, p_stride, Transpose::no, v + h0 * head,
                     head, Transpose::no, rows, hs, keys, 1.0f, 0.0f, g, precision);
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
  const long heads = long(B) * NH, group = std::max(1L, std::min(heads, scratch.heads_at_once));
  for (long h0 = 0; h0 < heads; h0 += group) {
    const long g = std::min(group, heads - h0);
    // Last block first: it touches every key row, so it initialises dk and dv (beta 0) and the
    // earlier blocks accumulate into their prefixes.
    for (long r = num_blocks(T) - 1; r >= 0; --r) {
      const Block blk = block(T, r);
      const long rows = blk.r1 - blk.r0, keys = blk.r1, r0 = blk.r0, block_size = rows * keys;
      const float beta = r == num_blocks(T) - 1 ? 0.0f : 1.0f;
      const float* a = saved.att + h0 * per_head + blk.offset; // g x [rows, keys]
      const float* dy = dyh + h0 * head + r0 * hs;             // g x [rows, hs]
      // dv first: in bf16 it reads the rounded probabilities from datt before datt is used.
      const auto [p, p_stride] = probabilities_operand(datt, a, per_head, block_size, g, bf16);
      matmul_batched(dv + h0 * head, head, p, p_stride, Transpose::yes, dy, head, Transpose::no,
                     keys, hs, rows, 1.0f, beta, g, precision);
      matmul_batched(datt, block_size, dy, head, Transpose::no, saved.v + h0 * head, head,
                     Transpose::yes, rows, keys, hs, 1.0f, 0.0f, g, precision);
      // Softmax backward in place: dS = att * (datt - rowsum(att * datt)) * scale.
      for_each_row(
          "layers::Attention::softmax_backward", g * rows, KOKKOS_LAMBDA(const Team& team) {
            const long gi = team.league_rank(), i = gi % rows, t = r0 + i;
            const float* ar = a + (gi / rows) * per_head + i * keys;
            float* dr = datt + gi * keys; // (gi / rows) * block_size + i * keys
            const float dot = team_sum(team, t + 1, [&](long j) { return ar[j] * dr[j]; });
            team_for(team, t + 1, [&](long j) { dr[j] = ar[j] * (dr[j] - dot) * scale; });
            team_for(team, keys - t - 1, [&](long j) { dr[t + 1 + j] = 0.0f; });
          });
      if (bf16) round_to_bf16(datt, g * block_size);
      matmul_batched(dq + h0 * head + r0 * hs, head, datt, block_size, Transpose::no,
                     saved.k + h0 * head, head, Transpose::no, rows, hs, keys, 1.0f, 0.0f, g,
                     precision);
      matmul_batched(dk + h0 * head, head, datt, block_size, Transpose::yes,
                     saved.q + h0 * head + r0 * hs, head, Transpose::no, keys, hs, rows, 1.0f, beta,
                     g, precision);
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
