// A piece's op times from a profile or a machine file (op_costs.hpp).
#include "engine/op_costs.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "layers/model_config.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

OpTimes pick(const OpEntry& e, Piece piece) {
  return piece == Piece::block ? e.block : piece == Piece::embedding ? e.embedding : e.head;
}

OpTimes lerp(const OpTimes& a, const OpTimes& b, double f) {
  auto mix = [f](double x, double y) { return x + f * (y - x); };
  return OpTimes{mix(a.forward, b.forward), mix(a.backward, b.backward),
                 mix(a.backward_input, b.backward_input),
                 mix(a.backward_weight, b.backward_weight)};
}

// Measured: the profiled micro-batch sizes at this tp, linear in between.
OpTimes measured_op(const Profile& p, Piece piece, int tp, int b) {
  std::vector<const OpEntry*> at_tp;
  for (const OpEntry& e : p.ops) {
    if (e.tp == tp) at_tp.push_back(&e);
  }
  std::sort(at_tp.begin(), at_tp.end(),
            [](const OpEntry* x, const OpEntry* y) { return x->micro_batch < y->micro_batch; });
  if (at_tp.empty() || b < at_tp.front()->micro_batch || b > at_tp.back()->micro_batch) {
    std::string sizes;
    for (const OpEntry* e : at_tp)
      sizes += (sizes.empty() ? "" : ",") + std::to_string(e->micro_batch);
    throw Error(fmt::format("not in the profile: tp {}, micro-batch {} (it measured tp {} at "
                            "micro-batches {}); profile with --tp {} --micro-batches {}",
                            tp, b, tp, sizes.empty() ? "none" : sizes, tp, b));
  }
  for (std::size_t i = 0; i + 1 < at_tp.size(); ++i) {
    const int lo = at_tp[i]->micro_batch, hi = at_tp[i + 1]->micro_batch;
    if (b >= lo && b <= hi) {
      return lerp(pick(*at_tp[i], piece), pick(*at_tp[i + 1], piece), double(b - lo) / (hi - lo));
    }
  }
  return pick(*at_tp.back(), piece);
}

// A machine file: each GEMM's FLOPs at the throughput its size gets in the run's precision,
// element-wise bytes at its memory bandwidth, and the tensor-parallel all-reduces over its
// intra-node link.
OpTimes machine_op(const Profile& p, const layers::ModelConfig& m, const std::string& precision,
                   Piece piece, int tp, int b) {
  const double N = double(b) * m.seq_len, C = m.d_model, T = m.seq_len, V = m.vocab_size;
  const double act_bytes = p.activation_bytes * N * C;
  const auto gemm = [&](double flops) { return matmul_seconds(p, precision, flops); };
  OpTimes t;
  if (piece == Piece::block) {
    // The block's four weight products (QKV, attention projection, MLP up and down), 2 N C C'
    // FLOPs each; each half of the backward repeats them.
    const double weights =
        gemm(2 * N * C * 3 * C / tp) + gemm(2 * N * C * C / tp) + 2 * gemm(2 * N * C * 4 * C / tp);
    // QK^T and AV over the full matrix, each one batched product over the (sequence, head)
    // pairs; the input half of the backward has two of each.
    const double attention = 2 * gemm(2 * N * T * C / tp);
    const double elementwise = 40 * N * C / tp * 4; // LayerNorms, GELU, softmax, residuals
    const double ar = tp > 1 ? 2 * all_reduce_seconds(p.intra.all_reduce, act_bytes, tp) : 0;
    t.forward = weights + attention + elementwise / p.memory_bandwidth + ar;
    t.backward_input = weights + 2 * attention + 2 * elementwise / p.memory_bandwidth + ar;
    t.backward_weight = weights;
    t.backward = t.backward_input + t.backward_weight;
  } else if (piece == Piece::head) {
    // Split by vocabulary rows under tp: the cross-entropy's maximum and sum over the shards
    // (all-reduces of N and 2 N floats) and the input gradient's sum (one of [N, C]).
    const double product = gemm(2 * N * C * V / tp);
    const double softmax = 4 * N * V / tp * 4;
    const double loss_ar = tp > 1 ? all_reduce_seconds(p.intra.all_reduce, 4 * N, tp) +
                                        all_reduce_seconds(p.intra.all_reduce, 8 * N, tp)
                                  : 0;
    const double input_ar = tp > 1 ? all_reduce_seconds(p.intra.all_reduce, act_bytes, tp) : 0;
    t.forward = product + softmax / p.memory_bandwidth + loss_ar;
    t.backward_input = product + softmax / p.memory_bandwidth + input_ar;
    t.backward_weight = product;
    t.backward = t.backward_input + t.backward_weight;
  } else {
    // Split by vocabulary rows under tp: the looked-up rows summed over the shards. The
    // embedding's gradients come with the input half (GPT::backward_input).
    const double ar = tp > 1 ? all_reduce_seconds(p.intra.all_reduce, act_bytes, tp) : 0;
    t.forward = 3 * act_bytes / p.memory_bandwidth + ar;
    t.backward_input = 3 * act_bytes / p.memory_bandwidth;
    t.backward = t.backward_input;
  }
  return t;
}

} // namespace

OpTimes op_cost(const Profile& p, const RunConfig& config, Piece piece, int tp, int b) {
  return p.source == "machine" ? machine_op(p, config.model, config.train.precision, piece, tp, b)
                               : measured_op(p, piece, tp, b);
}

} // namespace gridlm::engine
