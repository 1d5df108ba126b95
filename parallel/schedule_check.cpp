// The schedule checker and the timeline simulator. Both follow the dependencies of an op:
//   F(micro, q) needs F(micro, q - 1) from the stage of virtual stage q - 1 (an activation);
//   B(micro, q) needs F(micro, q) on its own stage and B(micro, q + 1) from the stage of
//   virtual stage q + 1 (a gradient); W(micro, q) needs B(micro, q) on its own stage.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "parallel/schedule.hpp"

namespace gridlm::parallel {
namespace {

// An op anywhere in the pipeline: kind, micro-batch, virtual stage.
using Key = std::tuple<int, int, int>;

Key key(OpKind kind, int micro, int virtual_stage) {
  return {static_cast<int>(kind), micro, virtual_stage};
}

int virtual_stage(const Schedule& s, int stage, const Op& op) {
  return op.chunk * s.stages + stage;
}

// A value per op of the pipeline, by Key (kind, micro-batch, virtual stage or chunk), in one
// array: looked up once per op input, where a std::map made the checker and the simulator of a
// large schedule (pp 64, 4096 micro-batches, 4 chunks: 2 M ops) take seconds, every step.
template <class T>
class OpTable {
public:
  OpTable(int stages, int micro_batches, T empty)
      : stages_(stages), micro_(micro_batches),
        values_(std::size_t(3) * std::size_t(stages) * std::size_t(micro_batches), empty) {}
  T& operator[](const Key& k) { return values_[index(k)]; }
  const T& operator[](const Key& k) const { return values_[index(k)]; }

private:
  std::size_t index(const Key& k) const {
    const auto [kind, micro, stage] = k;
    return (std::size_t(kind) * std::size_t(stages_) + std::size_t(stage)) * std::size_t(micro_) +
           std::size_t(micro);
  }
  int stages_, micro_;
  std::vector<T> values_;
};

struct Dep {
  Key key;
  bool remote; // produced on another stage: a message
};

// An op's inputs: at most two.
struct Deps {
  std::array<Dep, 2> at;
  int count = 0;
  void add(const Dep& d) { at[std::size_t(count++)] = d; }
  const Dep* begin() const { return at.data(); }
  const Dep* end() const { return at.data() + count; }
};

Deps dependencies(const Schedule& s, int stage, const Op& op) {
  const int q = virtual_stage(s, stage, op), last = s.stages * s.chunks - 1;
  auto remote = [&](int other) { return other % s.stages != stage; };
  Deps deps;
  switch (op.kind) {
  case OpKind::F:
    if (q > 0) deps.add({key(OpKind::F, op.micro, q - 1), remote(q - 1)});
    break;
  case OpKind::B:
    deps.add({key(OpKind::F, op.micro, q), false});
    if (q < last) deps.add({key(OpKind::B, op.micro, q + 1), remote(q + 1)});
    break;
  case OpKind::W: deps.add({key(OpKind::B, op.micro, q), false}); break;
  }
  return deps;
}

constexpr double never = std::numeric_limits<double>::infinity();

// Makespan, bubble and the activations each stage holds, from the slots.
void summarise(const Schedule& s, Timeline& tl) {
  const bool split = s.kind == ScheduleKind::zb_h1;
  tl.peak_in_flight.assign(s.stages, 0);
  tl.peak_per_chunk.assign(s.stages, 0);
  double busy = 0.0;
  for (int st = 0; st < s.stages; ++st) {
    int held = 0;
    std::vector<int> chunk_held(std::size_t(std::max(1, s.chunks)), 0);
    for (const auto& slot : tl.stages[st]) {
      busy += slot.end - slot.start;
      tl.makespan = std::max(tl.makespan, slot.end);
      // Activations are held from F until the last op that needs them (B, or W when split).
      const int delta = slot.op.kind == OpKind::F                         ? 1
                        : slot.op.kind == (split ? OpKind::W : OpKind::B) ? -1
                                                                          : 0;
      held += delta;
      int& mine = chunk_held[std::size_t(slot.op.chunk)];
      mine += delta;
      tl.peak_in_flight[st] = std::max(tl.peak_in_flight[st], held);
      tl.peak_per_chunk[st] = std::max(tl.peak_per_chunk[st], mine);
    }
  }
  tl.bubble = tl.makespan > 0 ? 1.0 - busy / (s.stages * tl.makespan) : 0.0;
}

// The time stage `st`'s next op may start: its stage free and its inputs arrived (infinity while
// an input is not yet produced).
double ready_time(const Schedule& s, int st, const Op& op, double free_at,
                  const OpTable<double>& end, double transfer) {
  double ready = free_at;
  for (const Dep& d : dependencies(s, st, op)) {
    const double e = end[d.key];
    if (e == never) return never;
    ready = std::max(ready, e + (d.remote ? transfer : 0.0));
  }
  return ready;
}

// Ends of ops not yet run: `never`.
OpTable<double> no_ends(const Schedule& s) {
  return OpTable<double>(s.stages * s.chunks, s.micro_batches, never);
}

// Stage st's list on its own: every op exactly once, micro-batch and chunk in range, of the
// kinds the schedule has, F before B before W of the same micro-batch and chunk.
std::string stage_problem(const Schedule& s, int st) {
  const bool split = s.kind == ScheduleKind::zb_h1;
  const bool forward_only = s.kind == ScheduleKind::forward_only;
  OpTable<int> seen(s.chunks, s.micro_batches, -1); // position in the list, by (kind, micro, chunk)
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.ops[st].size(); ++i) {
    const Op& op = s.ops[st][i];
    if (op.micro < 0 || op.micro >= s.micro_batches || op.chunk < 0 || op.chunk >= s.chunks) {
      return fmt::format("stage {}: {} is out of range", st, op_text(op, s.chunks));
    }
    if (op.kind == OpKind::W && !split) {
      return fmt::format("stage {}: {} in a schedule without split backward", st,
                         op_text(op, s.chunks));
    }
    if (op.kind != OpKind::F && forward_only) {
      return fmt::format("stage {}: {} in a forward-only schedule", st, op_text(op, s.chunks));
    }
    int& pos = seen[key(op.kind, op.micro, op.chunk)];
    if (pos >= 0) return fmt::format("stage {}: {} appears twice", st, op_text(op, s.chunks));
    pos = int(i);
    ++count;
  }
  const std::size_t per_micro = forward_only ? 1 : split ? 3 : 2;
  const std::size_t expected = std::size_t(s.micro_batches) * s.chunks * per_micro;
  if (count != expected) {
    return fmt::format("stage {} has {} ops; expected {}", st, count, expected);
  }
  // Complete and without repeats, so every op of each (micro-batch, chunk) is in the table.
  for (const OpKind kind : {OpKind::B, OpKind::W}) {
    if (kind == OpKind::B ? forward_only : !split) continue;
    for (int micro = 0; micro < s.micro_batches; ++micro) {
      for (int chunk = 0; chunk < s.chunks; ++chunk) {
        const OpKind earlier = OpKind(int(kind) - 1);
        if (seen[key(earlier, micro, chunk)] > seen[key(kind, micro, chunk)]) {
          return fmt::format("stage {}: {} comes before {}", st,
                             op_text({kind, micro, chunk}, s.chunks),
                             op_text({earlier, micro, chunk}, s.chunks));
        }
      }
    }
  }
  return "";
}

} // namespace

std::string check_schedule(const Schedule& s) {
  if (int(s.ops.size()) != s.stages) {
    return fmt::format("{} stage lists for {} stages", s.ops.size(), s.stages);
  }
  for (int st = 0; st < s.stages; ++st) {
    std::string problem = stage_problem(s, st);
    if (!problem.empty()) return problem;
  }
  // Running together: each stage executes its list in order; an op waits for its inputs.
  // Sends never block (the executor posts them non-blocking), so this is the deadlock test.
  OpTable<char> done(s.stages * s.chunks, s.micro_batches, 0);
  std::vector<std::size_t> next(s.stages, 0);
  std::map<std::pair<int, int>, long> sent, received; // (from stage, to stage)
  for (bool progress = true; progress;) {
    progress = false;
    for (int st = 0; st < s.stages; ++st) {
      while (next[st] < s.ops[st].size()) {
        const Op& op = s.ops[st][next[st]];
        const auto deps = dependencies(s, st, op);
        if (!std::all_of(deps.begin(), deps.end(), [&](const Dep& d) { return done[d.key]; }))
          break;
        for (const Dep& d : deps) {
          if (d.remote) ++received[{std::get<2>(d.key) % s.stages, st}];
        }
        const int q = virtual_stage(s, st, op);
        done[key(op.kind, op.micro, q)] = 1;
        if (op.kind == OpKind::F && q < s.stages * s.chunks - 1 && (q + 1) % s.stages != st) {
          ++sent[{st, (q + 1) % s.stages}];
        }
        if (op.kind == OpKind::B && q > 0 && (q - 1) % s.stages != st) {
          ++sent[{st, (q - 1) % s.stages}];
        }
        ++next[st];
        progress = true;
      }
    }
  }
  for (int st = 0; st < s.stages; ++st) {
    if (next[st] < s.ops[st].size()) {
      return fmt::format("deadlock: stage {} waits forever at {} (op {} of {})", st,
                         op_text(s.ops[st][next[st]], s.chunks), next[st] + 1, s.ops[st].size());
    }
  }
  if (sent != received) return "some activation or gradient sent is never received";
  return "";
}

Timeline simulate(const Schedule& s, const OpCosts& c) {
  const bool split = s.kind == ScheduleKind::zb_h1;
  auto cost = [&](int, const Op& op) {
    if (op.kind == OpKind::F) return c.forward;
    if (op.kind == OpKind::B) return split ? c.backward : c.backward + c.weight;
    return c.weight;
  };
  return simulate(s, cost, c.transfer);
}

Timeline simulate(const Schedule& s, const OpCostFn& cost, double transfer) {
  Timeline tl;
  tl.stages.resize(s.stages);
  OpTable<double> end = no_ends(s);
  std::vector<std::size_t> next(s.stages, 0);
  std::vector<double> free_at(s.stages, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int st = 0; st < s.stages; ++st) {
      while (next[st] < s.ops[st].size()) {
        const Op& op = s.ops[st][next[st]];
        const double ready = ready_time(s, st, op, free_at[st], end, transfer);
        if (ready == never) break;
        const double finish = ready + cost(st, op);
        end[key(op.kind, op.micro, virtual_stage(s, st, op))] = finish;
        tl.stages[st].push_back({op, ready, finish});
        free_at[st] = finish;
        ++next[st];
        progress = true;
      }
    }
  }
  summarise(s, tl);
  return tl;
}

Timeline simulate(const Schedule& s, const OpCostFn& cost, double transfer,
                  const CoreSharing& sharing) {
  const int P = s.stages;
  std::size_t nodes = 0;
  for (const auto& r : sharing.ranks)
    nodes = std::max(nodes, r.size());
  Timeline tl;
  tl.stages.resize(P);
  OpTable<double> end = no_ends(s);
  std::vector<std::size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0), left(P, 0.0), started(P, 0.0), ready(P, never), rate(P, 1.0);
  std::vector<char> running(P, 0);
  for (double now = 0.0;;) {
    for (int st = 0; st < P; ++st) {
      if (running[st]) continue;
      if (next[st] == s.ops[st].size()) {
        ready[st] = never;
        continue;
      }
      const Op& op = s.ops[st][next[st]];
      ready[st] = ready_time(s, st, op, free_at[st], end, transfer);
      if (ready[st] != never && ready[st] > free_at[st] + sharing.yield_for)
        ready[st] += sharing.wake;
      if (ready[st] <= now) running[st] = 1, left[st] = cost(st, op), started[st] = now;
    }
    // Each computing stage runs at the share of a core its most crowded node gives a thread.
    std::vector<double> computing(nodes, 0.0);
    for (int st = 0; st < P; ++st) {
      for (std::size_t n = 0; running[st] && n < sharing.ranks[st].size(); ++n)
        computing[n] += sharing.ranks[st][n] * sharing.threads_per_rank;
    }
    double step = never;
    for (int st = 0; st < P; ++st) {
      rate[st] = 1.0;
      for (std::size_t n = 0; n < sharing.ranks[st].size(); ++n) {
        if (sharing.ranks[st][n] > 0 && computing[n] > sharing.cores)
          rate[st] = std::min(rate[st], sharing.cores / computing[n]);
      }
      step = std::min(step, running[st] ? left[st] / rate[st] : ready[st] - now);
    }
    if (step == never) break; // every op done
    now += step;
    for (int st = 0; st < P; ++st) {
      if (!running[st]) continue;
      if (left[st] / rate[st] > step * (1 + 1e-12)) {
        left[st] -= rate[st] * step;
        continue;
      }
      const Op& op = s.ops[st][next[st]];
      end[key(op.kind, op.micro, virtual_stage(s, st, op))] = now;
      tl.stages[st].push_back({op, started[st], now});
      free_at[st] = now, running[st] = 0, ++next[st];
    }
  }
  summarise(s, tl);
  return tl;
}

} // namespace gridlm::parallel
