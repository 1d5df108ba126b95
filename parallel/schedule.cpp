// Schedule generation: fill-drain, 1F1B, Megatron's interleaved 1F1B, and zero-bubble ZB-H1.
#include "parallel/schedule.hpp"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::parallel {

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::gpipe: return "gpipe";
  case ScheduleKind::one_f_one_b: return "1f1b";
  case ScheduleKind::interleaved: return "interleaved-1f1b";
  case ScheduleKind::zb_h1: return "zb-h1";
  case ScheduleKind::forward_only: return "forward-only";
  }
  return "?";
}

ScheduleKind parse_schedule(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zb_h1}) {
    if (name == schedule_name(k)) return k;
  }
  throw Error(fmt::format("unknown schedule '{}'; the schedules are gpipe, 1f1b, "
                          "interleaved-1f1b and zb-h1",
                          name));
}

std::string op_text(const Op& op, int chunks) {
  const char kind = op.kind == OpKind::F ? 'F' : op.kind == OpKind::B ? 'B' : 'W';
  return chunks > 1 ? fmt::format("{}{}.{}", kind, op.micro, op.chunk)
                    : fmt::format("{}{}", kind, op.micro);
}

namespace {

std::vector<Op> fill_drain(int m) {
  std::vector<Op> ops;
  for (int i = 0; i < m; ++i)
    ops.push_back({OpKind::F, i, 0});
  for (int i = 0; i < m; ++i)
    ops.push_back({OpKind::B, i, 0});
  return ops;
}

// Warm-up forwards, then one forward and one backward in turn, then the remaining backwards.
// forward(k) and backward(k) name the k-th forward and backward of the stage.
std::vector<Op> one_f_one_b(int total, int warmup, const std::function<Op(int)>& forward,
                            const std::function<Op(int)>& backward) {
  warmup = std::min(warmup, total);
  std::vector<Op> ops;
  for (int k = 0; k < warmup; ++k)
    ops.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    ops.push_back(forward(warmup + k));
    ops.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k)
    ops.push_back(backward(k));
  return ops;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's order of F and B, with stage
// s running each W s micro-batches after its B and the deferred W's at the end, where they
// fill the drain phase's bubbles. Stage s then holds at most (p - s - 1) + 1 + s = p
// micro-batches (from F until W): 1F1B's peak, that of its first stage. With unit costs its
// makespan is the paper's 3m + p - 1 for m >= p: bubble (p - 1)(F + B - W) (tested).
std::vector<Op> zero_bubble_h1(int p, int s, int m) {
  const int warmup = std::min(p - s - 1, m);
  std::vector<Op> ops;
  for (int k = 0; k < warmup; ++k)
    ops.push_back({OpKind::F, k, 0});
  int next_w = 0;
  for (int k = 0; k < m; ++k) {
    if (k + warmup < m) ops.push_back({OpKind::F, k + warmup, 0});
    ops.push_back({OpKind::B, k, 0});
    if (k - s >= 0) ops.push_back({OpKind::W, next_w++, 0});
  }
  while (next_w < m)
    ops.push_back({OpKind::W, next_w++, 0});
  return ops;
}

} // namespace

Schedule make_schedule(ScheduleKind kind, int p, int m, int v) {
  if (p < 1 || m < 1 || v < 1) {
    throw Error(fmt::format("a schedule needs at least one stage, micro-batch and chunk, not "
                            "pp = {}, micro-batches = {}, chunks = {}",
                            p, m, v));
  }
  if (v > 1 && kind != ScheduleKind::interleaved && kind != ScheduleKind::forward_only) {
    throw Error(fmt::format("schedule {} runs one model chunk per stage; --chunks {} needs "
                            "interleaved-1f1b",
                            schedule_name(kind), v));
  }
  if (kind == ScheduleKind::interleaved && v > 1 && m % p != 0) {
    const int below = m / p * p, above = below + p;
    throw Error(fmt::format(
        "interleaved-1f1b needs the micro-batches ({}) to be a multiple of "
        "the pipeline stages ({}); use {} micro-batches (train.grad_accum; in gridlm plan, "
        "--micro-batches), else another parallel.pp",
        m, p, below > 0 ? fmt::format("{} or {}", below, above) : fmt::format("{}", above)));
  }
  Schedule s{kind, p, m, v, std::vector<std::vector<Op>>(p)};
  for (int stage = 0; stage < p; ++stage) {
    if (kind == ScheduleKind::forward_only) {
      // Micro-batch by micro-batch through the chunks: each F's input comes from an earlier op.
      for (int i = 0; i < m; ++i) {
        for (int c = 0; c < v; ++c)
          s.ops[stage].push_back({OpKind::F, i, c});
      }
    } else if (kind == ScheduleKind::zb_h1) {
      s.ops[stage] = zero_bubble_h1(p, stage, m);
    } else if (kind == ScheduleKind::gpipe) {
      s.ops[stage] = fill_drain(m);
    } else if (kind == ScheduleKind::one_f_one_b || v == 1) {
      auto f = [](int k) { return Op{OpKind::F, k, 0}; };
      auto b = [](int k) { return Op{OpKind::B, k, 0}; };
      s.ops[stage] = one_f_one_b(m, p - stage - 1, f, b);
    } else {
      // Megatron's interleaving: groups of p micro-batches go through chunk 0, then chunk 1, ...
      // forwards in chunk order, backwards in reverse chunk order.
      auto micro = [p, v](int k) { return k / (p * v) * p + k % p; };
      auto f = [=](int k) { return Op{OpKind::F, micro(k), (k / p) % v}; };
      auto b = [=](int k) { return Op{OpKind::B, micro(k), v - 1 - (k / p) % v}; };
      s.ops[stage] = one_f_one_b(m * v, (p - stage - 1) * 2 + (v - 1) * p, f, b);
    }
  }
  return s;
}

} // namespace gridlm::parallel
