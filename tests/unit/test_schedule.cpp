// Pipeline schedules as data: every kind is checked exhaustively over p <= 8, m <= 32, v <= 4;
// the checker catches broken schedules; the simulator reproduces the known bubble formulas
// with uniform costs, and zb-h1 beats 1f1b within 1f1b's activation memory; sharing a node's
// cores slows the stages computing at once and nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"
#include "parallel/pipeline_plan.hpp"
#include "parallel/schedule.hpp"
#include "parallel/schedule_transfers.hpp"

using namespace gridlm::parallel;

TEST(Schedule, EveryKindPassesTheCheckerExhaustively) {
  int checked = 0;
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
        const Schedule s = make_schedule(k, p, m);
        ASSERT_EQ(check_schedule(s), "") << schedule_name(k) << " p=" << p << " m=" << m;
        ASSERT_EQ(check_grouped_transfers(s), "") << schedule_name(k) << " p=" << p << " m=" << m;
        ++checked;
      }
      for (int v = 1; v <= 4; ++v) {
        if (v > 1 && m % p != 0) continue;
        const Schedule s = make_schedule(ScheduleKind::interleaved, p, m, v);
        ASSERT_EQ(check_schedule(s), "") << "interleaved p=" << p << " m=" << m << " v=" << v;
        if (v == 1) {
          ASSERT_EQ(check_grouped_transfers(s), "") << "interleaved p=" << p << " m=" << m;
        }
        const Schedule eval = make_schedule(ScheduleKind::forward_only, p, m, v);
        ASSERT_EQ(check_schedule(eval), "") << "forward-only p=" << p << " m=" << m << " v=" << v;
        checked += 2;
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(Schedule, CheckerFindsDeadlocksAndMistakes) {
  Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  ASSERT_EQ(check_schedule(s), "");
  // Stage 0 waits for B0 before sending F1; stage 1 needs F1 before it sends B0.
  Schedule dead = s;
  dead.ops[0] = {{OpKind::F, 0, 0}, {OpKind::B, 0, 0}, {OpKind::F, 1, 0}, {OpKind::B, 1, 0}};
  dead.ops[1] = {{OpKind::F, 0, 0}, {OpKind::F, 1, 0}, {OpKind::B, 0, 0}, {OpKind::B, 1, 0}};
  EXPECT_NE(check_schedule(dead).find("deadlock: stage 0 waits forever at B0"), std::string::npos)
      << check_schedule(dead);
  Schedule missing = s;
  missing.ops[1].pop_back();
  EXPECT_NE(check_schedule(missing).find("stage 1 has 3 ops; expected 4"), std::string::npos);
  Schedule twice = s;
  twice.ops[0][1] = twice.ops[0][0];
  EXPECT_NE(check_schedule(twice).find("appears twice"), std::string::npos);
  Schedule order = s;
  std::swap(order.ops[1][0], order.ops[1][1]); // B0 before F0 on the last stage
  EXPECT_NE(check_schedule(order).find("comes before"), std::string::npos);
  Schedule w = s;
  w.ops[0].push_back({OpKind::W, 0, 0});
  EXPECT_NE(check_schedule(w).find("without split backward"), std::string::npos);
  Schedule eval = make_schedule(ScheduleKind::forward_only, 2, 2);
  ASSERT_EQ(check_schedule(eval), "");
  eval.ops[1].back() = {OpKind::B, 1, 0};
  EXPECT_NE(check_schedule(eval).find("B1 in a forward-only schedule"), std::string::npos)
      << check_schedule(eval);
  eval.ops[1].pop_back();
  EXPECT_NE(check_schedule(eval).find("stage 1 has 1 ops; expected 2"), std::string::npos)
      << check_schedule(eval);
}

TEST(Schedule, RefusesImpossibleParameters) {
  EXPECT_THROW(make_schedule(ScheduleKind::one_f_one_b, 0, 4), gridlm::Error);
  EXPECT_THROW(make_schedule(ScheduleKind::one_f_one_b, 2, 4, 2), gridlm::Error);
  EXPECT_THROW(make_schedule(ScheduleKind::interleaved, 4, 6, 2), gridlm::Error);
  EXPECT_THROW(parse_schedule("1f2b"), gridlm::Error);
  EXPECT_EQ(parse_schedule("zb-h1"), ScheduleKind::zb_h1);
}

// The refusal of a micro-batch count that interleaving cannot use names the counts it can.
TEST(Schedule, InterleavingSuggestsTheNearestUsableMicroBatchCounts) {
  const auto message = [](int p, int m) -> std::string {
    try {
      make_schedule(ScheduleKind::interleaved, p, m, 2);
    } catch (const gridlm::Error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message(4, 6).find("; use 4 or 8"), std::string::npos) << message(4, 6);
  EXPECT_NE(message(4, 1).find("; use 4"), std::string::npos) << message(4, 1);
  EXPECT_EQ(message(4, 1).find(" or "), std::string::npos) << "no count below 1 to offer";
}

TEST(Simulator, FillDrainAnd1F1BMatchTheFormula) {
  const OpCosts uniform{1.0, 2.0, 0.0, 0.0};
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {1, 4, 16, 32}) {
      const double formula = double(p - 1) / double(m + p - 1);
      for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
        EXPECT_NEAR(simulate(make_schedule(k, p, m), uniform).bubble, formula, 1e-12)
            << schedule_name(k) << " p=" << p << " m=" << m;
      }
    }
  }
}

TEST(Simulator, InterleavingDividesTheBubbleByTheChunks) {
  for (int p : {2, 4, 8}) {
    for (int m : {8, 16, 32}) {
      for (int v : {2, 4}) {
        // Each chunk holds 1/v of the stage's layers.
        const OpCosts chunk{1.0 / v, 2.0 / v, 0.0, 0.0};
        const double bubble =
            simulate(make_schedule(ScheduleKind::interleaved, p, m, v), chunk).bubble;
        EXPECT_NEAR(bubble, double(p - 1) / double(v * m + p - 1), 1e-9)
            << "p=" << p << " m=" << m << " v=" << v;
      }
    }
  }
}

TEST(Simulator, ZeroBubbleH1BeatsOneFOneBWithinItsMemory) {
  for (int p : {2, 4, 8}) {
    for (int m : {4, 8, 16, 32}) {
      // The same work: B of 1f1b = B + W of zb-h1.
      const Timeline one = simulate(make_schedule(ScheduleKind::one_f_one_b, p, m), {1, 1, 1, 0});
      const Timeline zb = simulate(make_schedule(ScheduleKind::zb_h1, p, m), {1, 1, 1, 0});
      EXPECT_LT(zb.bubble, one.bubble) << "p=" << p << " m=" << m;
      // The paper's ZB-H1 makespan with unit costs: 3m + p - 1 (bubble (p-1)(F+B-W)).
      if (m >= p) {
        EXPECT_EQ(zb.makespan, 3 * m + p - 1) << "p=" << p << " m=" << m;
      }
      for (int s = 0; s < p; ++s) {
        EXPECT_LE(zb.peak_in_flight[s], one.peak_in_flight[0]) << "p=" << p << " stage " << s;
        EXPECT_EQ(one.peak_in_flight[s], std::min(p - s, m));
      }
    }
  }
}

TEST(Simulator, TransfersAndGPipeMemory) {
  const Timeline g = simulate(make_schedule(ScheduleKind::gpipe, 4, 8), {1, 2, 0, 0.5});
  EXPECT_EQ(g.peak_in_flight[0], 8) << "fill-drain holds every micro-batch";
  const Timeline free = simulate(make_schedule(ScheduleKind::gpipe, 4, 8), {1, 2, 0, 0});
  EXPECT_NEAR(g.makespan - free.makespan, 2 * 3 * 0.5, 1e-12) << "3 hops forward and back";
}

namespace {

// Every training schedule the planner prices, at a few sizes.
std::vector<Schedule> some_schedules() {
  std::vector<Schedule> out;
  for (int p : {1, 2, 4}) {
    for (int m : {1, 4, 8}) {
      for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1})
        out.push_back(make_schedule(k, p, m));
      if (m % p == 0) out.push_back(make_schedule(ScheduleKind::interleaved, p, m, 2));
    }
  }
  return out;
}

// Uneven costs: later stages and backward ops cost more.
double uneven(int stage, const Op& op) {
  return (1.0 + 0.25 * stage + 0.1 * op.chunk) * (op.kind == OpKind::F ? 1.0 : 1.7);
}

void expect_same_timeline(const Timeline& a, const Timeline& b, const std::string& what) {
  ASSERT_EQ(a.stages.size(), b.stages.size()) << what;
  for (std::size_t st = 0; st < a.stages.size(); ++st) {
    ASSERT_EQ(a.stages[st].size(), b.stages[st].size()) << what;
    for (std::size_t i = 0; i < a.stages[st].size(); ++i) {
      EXPECT_TRUE(a.stages[st][i].op == b.stages[st][i].op) << what;
      EXPECT_NEAR(a.stages[st][i].start, b.stages[st][i].start, 1e-9) << what << " stage " << st;
      EXPECT_NEAR(a.stages[st][i].end, b.stages[st][i].end, 1e-9) << what << " stage " << st;
    }
  }
  EXPECT_NEAR(a.makespan, b.makespan, 1e-9) << what;
  EXPECT_EQ(a.peak_in_flight, b.peak_in_flight) << what;
}

// Each stage's ops start and end at `want[stage][op]`.
void expect_ops_at(const Timeline& t,
                   const std::vector<std::vector<std::pair<double, double>>>& want) {
  ASSERT_EQ(t.stages.size(), want.size());
  for (std::size_t st = 0; st < want.size(); ++st) {
    ASSERT_EQ(t.stages[st].size(), want[st].size()) << "stage " << st;
    for (std::size_t i = 0; i < want[st].size(); ++i) {
      EXPECT_DOUBLE_EQ(t.stages[st][i].start, want[st][i].first) << "stage " << st << " op " << i;
      EXPECT_DOUBLE_EQ(t.stages[st][i].end, want[st][i].second) << "stage " << st << " op " << i;
    }
  }
}

std::string name(const Schedule& s) {
  return fmt::format("{} p={} m={} v={}", schedule_name(s.kind), s.stages, s.micro_batches,
                     s.chunks);
}

} // namespace

TEST(SharedCores, WithACorePerThreadItIsThePlainSimulation) {
  for (const Schedule& s : some_schedules()) {
    CoreSharing one_node{double(s.stages) * 2, 2, {}};
    one_node.ranks.assign(s.stages, {1});
    expect_same_timeline(simulate(s, uneven, 0.3, one_node), simulate(s, uneven, 0.3),
                         name(s) + ", a core per thread");
    // A core each, but every stage on a node of its own: stages never slow each other.
    CoreSharing own_nodes{1, 1, {}};
    for (int st = 0; st < s.stages; ++st) {
      own_nodes.ranks.emplace_back(s.stages, 0);
      own_nodes.ranks[st][st] = 1;
    }
    expect_same_timeline(simulate(s, uneven, 0.3, own_nodes), simulate(s, uneven, 0.3),
                         name(s) + ", a node per stage");
  }
}

TEST(SharedCores, OneCoreRunsAllTheWorkWithoutIdling) {
  // Without transfers some stage can always compute, and one core serves whoever does: the
  // makespan is the sum of every op's time.
  for (const Schedule& s : some_schedules()) {
    double work = 0;
    for (int st = 0; st < s.stages; ++st) {
      for (const Op& op : s.ops[st])
        work += uneven(st, op);
    }
    CoreSharing one_core{1, 1, {}};
    one_core.ranks.assign(s.stages, {1});
    EXPECT_NEAR(simulate(s, uneven, 0.0, one_core).makespan, work, 1e-9 * work) << name(s);
  }
}

TEST(SharedCores, TwoStagesOnOneCoreByHand) {
  // GPipe over 2 stages, 2 micro-batches, F = 1 and B = 2 with a core each: stage 0 F0 [0,1],
  // F1 [1,2]; stage 1 F0 [1,2], F1 [2,3], B0 [3,5], B1 [5,7]; stage 0 B0 [5,7], B1 [7,9].
  // On one core, two stages computing at once each go at half speed.
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 2);
  const auto cost = [](int, const Op& op) { return op.kind == OpKind::F ? 1.0 : 2.0; };
  const CoreSharing one_core{1, 1, {{1}, {1}}};
  const Timeline t = simulate(s, cost, 0.0, one_core);
  const std::vector<std::vector<std::pair<double, double>>> want{
      {{0, 1}, {1, 3}, {6, 10}, {10, 12}}, // F1 beside stage 1's F0, B0 beside its B1
      {{1, 3}, {3, 4}, {4, 6}, {6, 10}}};
  expect_ops_at(t, want);
  EXPECT_DOUBLE_EQ(t.makespan, 12);
  // Replicas and threads count as ranks computing: 2 replicas of each stage on 2 cores, or one
  // rank of 2 threads each, share the cores as one rank each does one core.
  expect_same_timeline(simulate(s, cost, 0.0, CoreSharing{2, 1, {{2}, {2}}}), t, "2 replicas");
  expect_same_timeline(simulate(s, cost, 0.0, CoreSharing{2, 2, {{1}, {1}}}), t, "2 threads");
}

TEST(SharedCores, AStageThatWaitedPastTheYieldWindowSeesItsInputLate) {
  // The GPipe of TwoStagesOnOneCoreByHand with a core each; a stage that has waited more than
  // 0.5 sleeps and wakes 0.25 after its input arrives. Stage 1: F0 input at 1 after waiting 1
  // -> [1.25, 2.25]; F1's input came at 2, while it computed -> [2.25, 3.25]; B0 [3.25, 5.25],
  // B1 [5.25, 7.25]. Stage 0: F0 [0, 1], F1 [1, 2]; B0's gradient at 5.25 after waiting since
  // 2 -> [5.5, 7.5]; B1's came at 7.25, while it computed -> [7.5, 9.5].
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 2);
  const auto cost = [](int, const Op& op) { return op.kind == OpKind::F ? 1.0 : 2.0; };
  const CoreSharing sleeps{2, 1, {{1}, {1}}, 0.5, 0.25};
  const Timeline t = simulate(s, cost, 0.0, sleeps);
  const std::vector<std::vector<std::pair<double, double>>> want{
      {{0, 1}, {1, 2}, {5.5, 7.5}, {7.5, 9.5}},
      {{1.25, 2.25}, {2.25, 3.25}, {3.25, 5.25}, {5.25, 7.25}}};
  expect_ops_at(t, want);
  // Waits shorter than the window never sleep: the plain simulation.
  const CoreSharing awake{2, 1, {{1}, {1}}, 5.0, 0.25};
  expect_same_timeline(simulate(s, cost, 0.0, awake), simulate(s, cost, 0.0), "waits < window");
}

TEST(GroupedTransfers, PairsEachSendWithItsReceive) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 4);
  // Stage 0's F0 sends to stage 1 the activation that stage 1's F0 receives, same tag.
  const OpTransfers f0 = op_transfers(s, 0, {OpKind::F, 0, 0});
  const OpTransfers g0 = op_transfers(s, 1, {OpKind::F, 0, 0});
  EXPECT_EQ(f0.recv_from, -1);
  EXPECT_EQ(f0.send_to, 1);
  EXPECT_EQ(g0.recv_from, 0);
  EXPECT_EQ(g0.recv_tag, f0.send_tag);
  const OpTransfers b1 = op_transfers(s, 1, {OpKind::B, 3, 0});
  EXPECT_EQ(b1.recv_from, -1) << "the last stage starts the backward";
  EXPECT_EQ(op_transfers(s, 0, {OpKind::B, 3, 0}).recv_tag, b1.send_tag);
  EXPECT_NE(b1.send_tag, op_transfers(s, 1, {OpKind::B, 2, 0}).send_tag);
  EXPECT_EQ(op_transfers(s, 1, {OpKind::W, 3, 0}).send_to, -1) << "W sends nothing";
}

// gpipe, 2 stages, 2 micro-batches. Up front, stage 0 posts both gradients' receives, then sends
// F0's and F1's outputs before it waits for one: 4 buffers. In groups: the two sends and B0's
// receive: 3. Stage 1 holds its two receives, or one at a time and then B0's and B1's sends: 2.
TEST(GroupedTransfers, BuffersHeldAtOnceCountedByHand) {
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 2);
  EXPECT_EQ(held_boundary_buffers(s, false), 4);
  EXPECT_EQ(held_boundary_buffers(s, true), 3);
  EXPECT_EQ(held_boundary_buffers(make_schedule(ScheduleKind::one_f_one_b, 1, 8), false), 0);
}

TEST(GroupedTransfers, CheckerFindsARendezvousDeadlock) {
  // Interleaving is deadlock-free with buffered sends (MPI), but its grouped plan is not:
  // stage 0 sends an activation in a group whose peer group on stage 1 never holds the
  // matching receive. The executor keeps such schedules on MPI.
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 4, 2);
  EXPECT_EQ(check_schedule(s), "");
  EXPECT_NE(check_grouped_transfers(s).find("deadlock"), std::string::npos);
}

// The tags number a step's micro-batches in a field of the step's own count: every transfer of a
// step has a tag of its own, below the tied embedding's, and the largest stays small enough for
// an MPI whose MPI_TAG_UB is the standard's least (32767) at pp 4 and 4095 micro-batches.
TEST(PipelinePlan, TagsAreDistinctAndWithinTheMpiTagBound) {
  // (stages, chunks, micro-batches): one stage handing over between its own chunks puts every
  // transfer on one (sender, receiver) pair, where neighbouring tag ranges would collide first.
  for (const auto& [pp, chunks, m] : {std::tuple{2, 1, max_micro_batches}, std::tuple{2, 2, 6},
                                      std::tuple{1, 2, 5}, std::tuple{4, 3, 8}}) {
    SCOPED_TRACE(fmt::format("pp {}, chunks {}, m {}", pp, chunks, m));
    for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::forward_only}) {
      const bool interleaved = chunks > 1 && kind == ScheduleKind::gpipe;
      const Schedule s =
          make_schedule(interleaved ? ScheduleKind::interleaved : kind, pp, m, chunks);
      std::set<std::tuple<int, int, int>> sent; // (from, to, tag)
      int largest = -1;
      for (int st = 0; st < s.stages; ++st) {
        for (const Op& op : s.ops[std::size_t(st)]) {
          const OpTransfers t = op_transfers(s, st, op);
          if (t.send_to >= 0) {
            EXPECT_TRUE(sent.emplace(st, t.send_to, t.send_tag).second);
            largest = std::max(largest, t.send_tag);
          }
        }
      }
      const std::size_t per_micro = kind == ScheduleKind::forward_only ? 1 : 2;
      EXPECT_EQ(sent.size(), per_micro * s.micro_batches * (pp * chunks - 1));
      EXPECT_LT(largest, tied_embedding_tag(s));
      EXPECT_EQ(tag_problem(s, tied_embedding_tag(s)), "");
      EXPECT_NE(tag_problem(s, tied_embedding_tag(s) - 1).find("MPI_TAG_UB"), std::string::npos);
    }
  }
  EXPECT_EQ(tag_problem(make_schedule(ScheduleKind::one_f_one_b, 4, 4095), 32767), "");
  EXPECT_NE(tag_problem(make_schedule(ScheduleKind::one_f_one_b, 4, 4096), 32767)
                .find("train.grad_accum 4096"),
            std::string::npos);
}

TEST(PipelinePlan, MoreMicroBatchesThanTheBoundAreRefused) {
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, max_micro_batches);
  EXPECT_NO_THROW(plan_pipeline(s, max_micro_batches, Transfers::up_front));
  EXPECT_THROW(plan_pipeline(s, max_micro_batches + 1, Transfers::up_front), gridlm::Error);
  const Schedule over = make_schedule(ScheduleKind::gpipe, 2, max_micro_batches + 1);
  EXPECT_THROW(plan_pipeline(over, 1, Transfers::up_front), gridlm::Error);
}

// A validation's forward-only steps: a divisor of the training step's micro-batches (so that
// its global batches split into equal steps), as large as the virtual stages (at least 4).
TEST(PipelinePlan, ValidationStepsDivideTheMicroBatchesAndFillThePipeline) {
  const auto eval = [](ScheduleKind kind, int p, int m, int v) {
    return validation_micro_batches(make_schedule(kind, p, m, v));
  };
  EXPECT_EQ(eval(ScheduleKind::one_f_one_b, 1, 1, 1), 1);
  EXPECT_EQ(eval(ScheduleKind::one_f_one_b, 1, 16, 1), 4);
  EXPECT_EQ(eval(ScheduleKind::one_f_one_b, 4, 8, 1), 4);
  EXPECT_EQ(eval(ScheduleKind::one_f_one_b, 8, 32, 1), 8);
  EXPECT_EQ(eval(ScheduleKind::one_f_one_b, 4, 6, 1), 3);
  EXPECT_EQ(eval(ScheduleKind::one_f_one_b, 4, 7, 1), 1);
  EXPECT_EQ(eval(ScheduleKind::interleaved, 4, 8, 2), 8);
}

// Each chunk of a stage takes activation slots from a list of its own (parallel::Executor), so
// a plan gives each chunk the most micro-batches that chunk holds at once, counted here from
// the op lists; interleaved-1f1b gave every chunk the stage's whole peak (v times too many:
// 9 slots x 4 chunks at pp 2, m 4, v 4, where 4 suffice).
TEST(PipelinePlan, EachChunkGetsItsOwnPeakOfActivations) {
  for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                  ScheduleKind::zb_h1, ScheduleKind::interleaved}) {
    for (int p = 1; p <= 4; ++p) {
      for (int v = 1; v <= (kind == ScheduleKind::interleaved ? 4 : 1); ++v) {
        for (int m = p; m <= 12; m += p) {
          SCOPED_TRACE(fmt::format("{} p {} m {} v {}", schedule_name(kind), p, m, v));
          const PipelinePlan plan =
              plan_pipeline(make_schedule(kind, p, m, v), m, Transfers::up_front);
          const OpKind last = kind == ScheduleKind::zb_h1 ? OpKind::W : OpKind::B;
          for (int s = 0; s < p; ++s) {
            std::vector<int> held(std::size_t(v), 0);
            int peak = 0;
            for (const Op& op : plan.train.ops[std::size_t(s)]) {
              int& h = held[std::size_t(op.chunk)];
              h += op.kind == OpKind::F ? 1 : op.kind == last ? -1 : 0;
              peak = std::max(peak, h);
            }
            EXPECT_EQ(plan.slots[std::size_t(s)], std::max(1, peak)) << "stage " << s;
          }
        }
      }
    }
  }
  const PipelinePlan p2 =
      plan_pipeline(make_schedule(ScheduleKind::interleaved, 2, 4, 4), 4, Transfers::up_front);
  EXPECT_EQ(p2.slots[0], 4);
  EXPECT_EQ(p2.uniform.peak_in_flight[0], 9);
}
