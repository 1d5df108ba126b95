// Transfers of a schedule, their grouping for NCCL and the rendezvous deadlock check.
#include "parallel/schedule_transfers.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gridlm::parallel {
namespace {

// what: 0 an activation into F, 1 a gradient into B, 2 the tied embedding; q: the receiving
// virtual stage. The step's own micro-batch count is the field's width, not max_micro_batches,
// so that tags stay within what an MPI allows (MPI_TAG_UB may be as low as 32767).
int tag(const Schedule& s, int what, int micro, int q) {
  return (what * s.stages * s.chunks + q) * s.micro_batches + micro;
}

} // namespace

int tied_embedding_tag(const Schedule& s) { return tag(s, 2, 0, 0); }

std::string tag_problem(const Schedule& s, int tag_upper_bound) {
  // The tied embedding's tag is the largest: the transfers' end one below it.
  const int largest = tied_embedding_tag(s);
  if (largest <= tag_upper_bound) return "";
  return fmt::format("its messages need tags up to {}, and this MPI allows {} (MPI_TAG_UB); "
                     "use fewer micro-batches per step (train.grad_accum {}), fewer chunks "
                     "(parallel.chunks {}) or fewer stages (parallel.pp {})",
                     largest, tag_upper_bound, s.micro_batches, s.chunks, s.stages);
}

OpTransfers op_transfers(const Schedule& s, int stage, const Op& op) {
  const int p = s.stages, Q = p * s.chunks, q = op.chunk * p + stage;
  OpTransfers t;
  if (op.kind == OpKind::F) {
    if (q > 0) {
      t.recv_from = (q - 1) % p;
      t.recv_tag = tag(s, 0, op.micro, q);
    }
    if (q < Q - 1) {
      t.send_to = (q + 1) % p;
      t.send_tag = tag(s, 0, op.micro, q + 1);
    }
  } else if (op.kind == OpKind::B) {
    if (q < Q - 1) {
      t.recv_from = (q + 1) % p;
      t.recv_tag = tag(s, 1, op.micro, q);
    }
    if (q > 0) {
      t.send_to = (q - 1) % p;
      t.send_tag = tag(s, 1, op.micro, q - 1);
    }
  }
  return t;
}

std::vector<std::vector<std::vector<GroupedTransfer>>> grouped_transfers(const Schedule& s) {
  std::vector<std::vector<std::vector<GroupedTransfer>>> plan(s.stages);
  for (int st = 0; st < s.stages; ++st) {
    const std::vector<Op>& ops = s.ops[st];
    plan[st].resize(ops.size() + 1);
    for (std::size_t i = 0; i <= ops.size(); ++i) {
      if (i > 0) {
        const OpTransfers prev = op_transfers(s, st, ops[i - 1]);
        if (prev.send_to >= 0 && prev.send_to != st)
          plan[st][i].push_back({true, prev.send_to, prev.send_tag});
      }
      if (i < ops.size()) {
        const OpTransfers cur = op_transfers(s, st, ops[i]);
        if (cur.recv_from >= 0 && cur.recv_from != st)
          plan[st][i].push_back({false, cur.recv_from, cur.recv_tag});
      }
    }
  }
  return plan;
}

std::string check_grouped_transfers(const Schedule& s) {
  const auto plan = grouped_transfers(s);
  const int p = s.stages;
  std::vector<std::size_t> cur(p, 0);
  // done[st][group][k]: transfer k of that group has met its peer.
  std::vector<std::vector<std::vector<bool>>> done(p);
  for (int st = 0; st < p; ++st) {
    for (const auto& g : plan[st])
      done[st].emplace_back(g.size(), false);
  }
  auto finished = [&](int st) { return cur[st] == plan[st].size(); };
  for (bool progress = true; progress;) {
    progress = false;
    for (int st = 0; st < p; ++st) {
      if (finished(st)) continue;
      const auto& group = plan[st][cur[st]];
      for (std::size_t k = 0; k < group.size(); ++k) {
        if (done[st][cur[st]][k]) continue;
        const GroupedTransfer& t = group[k];
        if (finished(t.peer)) continue;
        const auto& other = plan[t.peer][cur[t.peer]];
        for (std::size_t j = 0; j < other.size(); ++j) {
          if (other[j].peer == st && other[j].tag == t.tag && other[j].send != t.send) {
            done[st][cur[st]][k] = true;
            done[t.peer][cur[t.peer]][j] = true;
          }
        }
      }
      bool all = true;
      for (bool d : done[st][cur[st]])
        all = all && d;
      if (all) {
        ++cur[st];
        progress = true;
      }
    }
  }
  for (int st = 0; st < p; ++st) {
    if (finished(st)) continue;
    const std::size_t g = cur[st];
    const std::string before =
        g < s.ops[st].size() ? "before " + op_text(s.ops[st][g], s.chunks) : "after the last op";
    return fmt::format("grouped transfers deadlock: stage {} waits forever in its group {}", st,
                       before);
  }
  return "";
}

int held_boundary_buffers(const Schedule& s, bool grouped) {
  int most = 0;
  for (int stage = 0; stage < s.stages; ++stage) {
    const std::vector<Op>& ops = s.ops[std::size_t(stage)];
    auto waits = [&](const OpTransfers& t) { return t.recv_from >= 0 && t.recv_from != stage; };
    int receives = 0, sends = 0, handed = 0;
    if (!grouped) {
      for (const Op& op : ops)
        receives += waits(op_transfers(s, stage, op)) ? 1 : 0;
    }
    most = std::max(most, receives);
    for (const Op& op : ops) {
      const OpTransfers t = op_transfers(s, stage, op);
      if (grouped && waits(t)) ++receives;
      const int completed = waits(t) ? sends : 0;
      // The output's buffer is taken while the input's is still held; then the input goes, and
      // the sends this op's wait completed.
      if (t.send_to == stage) {
        ++handed;
      } else if (t.send_to >= 0) {
        ++sends;
      }
      most = std::max(most, receives + sends + handed);
      if (waits(t)) --receives;
      if (t.recv_from == stage) --handed;
      sends -= completed;
    }
  }
  return most;
}

} // namespace gridlm::parallel
