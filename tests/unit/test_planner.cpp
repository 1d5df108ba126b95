// The layout planner (engine/planner.hpp): its cost model's pieces against hand-computed step
// times, and its search against the engine's own refusals.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/auto_layout.hpp"
#include "engine/memory_budget.hpp"
#include "engine/planner.hpp"
#include "layers/model_config.hpp"
#include "layers/parameters.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/stage_layout.hpp"

namespace gridlm::engine {
namespace {

constexpr LinkCost kFree{0, 1e30}; // a link that costs nothing

RunConfig small_config() {
  RunConfig c;
  c.model.vocab_size = 256;
  c.model.seq_len = 16;
  c.model.n_layer = 4;
  c.model.n_head = 4;
  c.model.d_model = 32;
  c.model.tied_embeddings = false;
  c.train.micro_batch = 2;
  c.train.grad_accum = 4;
  c.train.eval_batches = 4;
  return c;
}

// Block F 1, B 2 (split 1.2 + 0.8), embedding F 0.5, head F 1 / B 2 (s) per sequence at tp 1;
// tp 2 at 80% efficiency; micro-batches 1 and 2; free links; no optimizer cost.
Profile hand_profile(const RunConfig& c) {
  Profile p;
  p.source = "profile";
  p.name = "hand";
  p.ranks = 4;
  p.ranks_per_node = 8;
  p.model = c.model;
  for (const int tp : {1, 2}) {
    for (const int b : {1, 2}) {
      const double s = double(b) / (tp == 1 ? 1.0 : 0.8 * tp);
      p.ops.push_back(OpEntry{tp,
                              b,
                              {1 * s, 2 * s, 1.2 * s, 0.8 * s},
                              {0.5 * s, 0.5 * s, 0.5 * s, 0},
                              {1 * s, 2 * s, 1.5 * s, 0.5 * s}});
    }
  }
  p.intra = CommCosts{kFree, kFree, kFree, kFree};
  return p;
}

Candidate candidate(int dp, int pp, int tp, const std::string& schedule, int b, int m,
                    std::vector<int> blocks, int chunks = 1, int zero = 0) {
  Candidate c;
  c.layout = parallel::Layout{dp, pp, tp};
  c.schedule = schedule;
  c.micro_batch = b;
  c.micro_batches = m;
  c.stage_blocks = std::move(blocks);
  c.chunks = chunks;
  c.zero = zero;
  return c;
}

TEST(Planner, OneRankIsMicroBatchesTimesForwardAndBackward) {
  const RunConfig c = small_config();
  const Profile p = hand_profile(c);
  // Per micro-batch of 1: F = 4 blocks + embedding + head = 5.5, B = 8 + 0.5 + 2 = 10.5.
  const Prediction r = predict(c, candidate(1, 1, 1, "1f1b", 1, 3, {4}), p);
  EXPECT_DOUBLE_EQ(r.step_seconds, 3 * (5.5 + 10.5));
  EXPECT_DOUBLE_EQ(r.tokens_per_second, 3.0 * 16 / r.step_seconds);
  EXPECT_DOUBLE_EQ(r.bubble, 0.0);
  // Op costs come from the profile's entry of the candidate's micro-batch size.
  EXPECT_DOUBLE_EQ(predict(c, candidate(1, 1, 1, "1f1b", 2, 3, {4}), p).step_seconds,
                   2 * r.step_seconds);
}

TEST(Planner, PipelineOfUniformStagesHasTheTextbookBubble) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  for (OpEntry& e : p.ops)
    e.embedding = e.head = OpTimes{}; // uniform stages: 2 blocks each
  // 1f1b, p = 2, m = 4: (m + p - 1)(F + B) with F = 2, B = 4.
  const Prediction one = predict(c, candidate(1, 2, 1, "1f1b", 1, 4, {2, 2}), p);
  EXPECT_DOUBLE_EQ(one.step_seconds, 5 * 6.0);
  EXPECT_NEAR(one.bubble, 1.0 / 5, 1e-12);
  // gpipe has the same makespan with uniform costs; zb-h1 fills part of the bubble with W.
  EXPECT_DOUBLE_EQ(predict(c, candidate(1, 2, 1, "gpipe", 1, 4, {2, 2}), p).step_seconds, 30.0);
  EXPECT_LT(predict(c, candidate(1, 2, 1, "zb-h1", 1, 4, {2, 2}), p).step_seconds, 30.0);
  // A stage transfer of 1 s per message (latency) adds to the critical path.
  p.intra.send_recv = LinkCost{1.0, 1e30};
  EXPECT_GT(predict(c, candidate(1, 2, 1, "1f1b", 1, 4, {2, 2}), p).step_seconds, 30.0 + 1.5);
}

TEST(Planner, DataParallelReductionIsExposedUnlessBucketsHideIt) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  p.intra.all_reduce = p.intra.reduce_scatter = p.intra.all_gather = LinkCost{1e-3, 1e6};
  c.parallel.grad_bucket_mb = 0; // one all-reduce after the backward: all of it exposed
  const double params = double(layers::make_param_table(c.model, {}, 0, 1).total);
  const double reduce = 2 * 1e-3 + 1.0 * 4 * params / 1e6; // g = 2: 2 latency steps, share 1
  const double scalars = 3 * (2 * 1e-3 + 64 / 1e6);
  const Prediction r = predict(c, candidate(2, 1, 1, "1f1b", 1, 1, {4}), p);
  EXPECT_NEAR(r.dp_exposed_seconds, reduce, 1e-12);
  EXPECT_NEAR(r.step_seconds, 16.0 + reduce + scalars, 1e-9);
  // Buckets of 64 KiB during a 10.5 s backward: the buckets wholly past the embeddings (34 KiB
  // at the buffer's start, reduced once the ops are done, as the engine does) hide; the bucket
  // that holds the embeddings' and the rest before it are exposed.
  c.parallel.grad_bucket_mb = 1.0 / 16;
  const double bucket = 65536, bytes = 4 * params, embeddings = 4 * (256 * 32 + 16 * 32);
  const double late = bytes - std::floor((bytes - embeddings) / bucket) * bucket;
  const double whole = std::floor(late / bucket), rest = late - whole * bucket;
  const Prediction b = predict(c, candidate(2, 1, 1, "1f1b", 1, 1, {4}), p);
  EXPECT_NEAR(b.dp_exposed_seconds,
              whole * (2 * 1e-3 + bucket / 1e6) + (rest > 0 ? 2 * 1e-3 + rest / 1e6 : 0), 1e-12);
  EXPECT_GT(late, embeddings);
  // A model that is mostly embedding (a large vocabulary, tied) hides none of that: all of the
  // embeddings' bytes are exposed.
  RunConfig v = c;
  v.model.vocab_size = 16384;
  v.model.tied_embeddings = true;
  Profile pv = hand_profile(v);
  pv.intra = p.intra;
  const Prediction vb = predict(v, candidate(2, 1, 1, "1f1b", 1, 1, {4}), pv);
  EXPECT_GT(vb.dp_exposed_seconds, 4.0 * (16384 * 32 + 16 * 32) / 1e6);
  // ZeRO-1 reduce-scatters (half an all-reduce) and pays an all-gather before the forward.
  c.parallel.grad_bucket_mb = 0;
  p.optimizer_per_param = 1e-6;
  const Prediction z = predict(c, candidate(2, 1, 1, "1f1b", 1, 1, {4}, 1, 1), p);
  EXPECT_NEAR(z.dp_exposed_seconds, 1e-3 + 0.5 * 4 * params / 1e6, 1e-12);
  EXPECT_GT(z.optimizer_seconds, 1e-6 * params / 2);
  const Prediction nz = predict(c, candidate(2, 1, 1, "1f1b", 1, 1, {4}), p);
  EXPECT_NEAR(nz.optimizer_seconds, 1e-6 * params, 1e-12);
}

TEST(Planner, StageTransfersCrossNodesWhereAnyReplicaStraddlesOne) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  p.inter = CommCosts{kFree, kFree, kFree, LinkCost{1.0, 1e30}}; // 1 s per send across nodes
  // dp 2 x pp 3 x tp 2 on nodes of 8: replica 0 is ranks 0-5, replica 1 ranks 6-11 (two nodes).
  const Candidate cand = candidate(2, 3, 2, "1f1b", 1, 3, {2, 1, 1});
  p.ranks_per_node = 12;
  const double inside = predict(c, cand, p).step_seconds;
  p.ranks_per_node = 8;
  const double across = predict(c, cand, p).step_seconds;
  // Every F and B of the critical path waits for a 1 s send: at least 2 (p - 1) of them.
  EXPECT_GE(across - inside, 4.0);
}

TEST(Planner, StagesShareAnOversubscribedNodesCores) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  for (OpEntry& e : p.ops)
    e.embedding = e.head = OpTimes{}; // uniform stages
  p.optimizer_per_param = 1e-6;
  // Timed as 4 ranks on a node of 2 cores: every op ran at half its speed alone.
  p.ranks_per_node = 4, p.cores_per_node = 2, p.threads_per_rank = 1, p.core_share = 0.5;
  Profile as_timed = p;
  as_timed.cores_per_node = 0, as_timed.core_share = 1; // a file without the fields: as measured
  // dp 4: every rank computes all the time, so every op and the optimizer run as timed.
  const Candidate dp4 = candidate(4, 1, 1, "1f1b", 1, 2, {4});
  EXPECT_NEAR(predict(c, dp4, p).step_seconds, predict(c, dp4, as_timed).step_seconds, 1e-9);
  // pp 4 with one micro-batch: one stage computes at a time, alone on a core, at twice the
  // timed speed (F 4 x 1 s + B 4 x 2 s timed, 6 s alone); the optimizer, every rank busy, as
  // timed.
  const Candidate pp4 = candidate(1, 4, 1, "1f1b", 1, 1, {1, 1, 1, 1});
  const Prediction shared = predict(c, pp4, p), timed = predict(c, pp4, as_timed);
  EXPECT_DOUBLE_EQ(timed.pipeline_seconds, 12.0);
  EXPECT_NEAR(shared.pipeline_seconds, 6.0, 1e-9);
  EXPECT_NEAR(shared.optimizer_seconds, timed.optimizer_seconds, 1e-15);
  // pp 4 with 8 micro-batches: the stages overlap, 4 computing on 2 cores in the steady state;
  // between the one-at-a-time and the fully shared extremes.
  const Candidate pp4m8 = candidate(1, 4, 1, "1f1b", 1, 8, {1, 1, 1, 1});
  const double overlapped = predict(c, pp4m8, p).pipeline_seconds;
  EXPECT_GT(overlapped, predict(c, pp4m8, as_timed).pipeline_seconds * 0.5);
  EXPECT_LT(overlapped, predict(c, pp4m8, as_timed).pipeline_seconds);
  // 2 ranks on the same 2 cores never share one: every op at its speed alone.
  const Candidate dp2 = candidate(2, 1, 1, "1f1b", 1, 2, {4});
  EXPECT_NEAR(predict(c, dp2, p).pipeline_seconds, 0.5 * predict(c, dp2, as_timed).pipeline_seconds,
              1e-9);
  EXPECT_NEAR(predict(c, dp2, p).optimizer_seconds,
              0.5 * predict(c, dp2, as_timed).optimizer_seconds, 1e-15);
  // Nodes of 2 ranks on 1 core: dp 2 x pp 2 puts each replica's two stages on a node of its own,
  // which computes one stage at a time at one rank's speed alone.
  p.ranks_per_node = 2, p.cores_per_node = 1;
  as_timed.ranks_per_node = 2;
  const Candidate replicas = candidate(2, 2, 1, "1f1b", 1, 1, {2, 2});
  EXPECT_NEAR(predict(c, replicas, p).pipeline_seconds,
              0.5 * predict(c, replicas, as_timed).pipeline_seconds, 1e-9);
  // Planning nodes of another size: their cores are unknown, a core per thread is assumed (each
  // op at its speed alone, nothing shared).
  PlanRequest other = make_request(4, 8, 4);
  other.layout = parallel::Layout{1, 4, 1};
  other.max_micro_batch = 1;
  const PlanResult planned = plan_layouts(c, other, p);
  ASSERT_FALSE(planned.ranked.empty());
  Profile spare = p;
  spare.ranks_per_node = 8, spare.cores_per_node = 0;
  for (const Ranked& r : planned.ranked) {
    EXPECT_NEAR(r.prediction.step_seconds, predict(c, r.candidate, spare).step_seconds, 1e-9)
        << r.candidate.str();
  }
  const Prediction alone = predict(c, candidate(1, 4, 1, "1f1b", 1, 4, {1, 1, 1, 1}), spare);
  EXPECT_NEAR(
      alone.pipeline_seconds,
      0.5 * predict(c, candidate(1, 4, 1, "1f1b", 1, 4, {1, 1, 1, 1}), as_timed).pipeline_seconds,
      1e-9);
}

// A machine file of nodes of 8 devices: GEMMs at `flops`, element-wise work and links free.
Profile machine_of(double flops) {
  Profile m;
  m.source = "machine";
  m.ranks_per_node = 8;
  m.matmul_flops = flops;
  m.memory_bandwidth = 1e30;
  m.intra = CommCosts{kFree, kFree, kFree, kFree};
  return m;
}

TEST(Planner, MachineFileCountsFlops) {
  RunConfig c = small_config();
  const Profile m = machine_of(1e9);
  const double N = 16, C = 32, T = 16, V = 256;
  const double block_f = (2 * N * 12 * C * C + 4 * N * T * C) / 1e9;
  const double head_f = 2 * N * C * V / 1e9;
  const Prediction r = predict(c, candidate(1, 1, 1, "1f1b", 1, 1, {4}), m);
  // The backward: twice the forward's GEMMs and attention products.
  const double block_b = (2 * 2 * N * 12 * C * C + 2 * 4 * N * T * C) / 1e9;
  EXPECT_NEAR(r.step_seconds, 4 * (block_f + block_b) + 3 * head_f, 1e-12);
}

// Under tp a machine file prices every collective the engine runs: two all-reduces in each
// block's forward and two in its input backward, one in the embedding's forward (its rows are
// split by vocabulary), two in the cross-entropy (the maximum and sum over the shards) and one
// in the head's input backward: 4 x 4 + 1 + 2 + 1 = 20 per micro-batch, at 2 s each here (a
// 1 s latency, two ring steps at tp 2) with compute free. The last four used to be left out.
TEST(Planner, MachineFileCountsEveryTensorParallelAllReduce) {
  RunConfig c = small_config();
  Profile m = machine_of(1e30);
  m.intra.all_reduce = LinkCost{1.0, 1e30};
  EXPECT_NEAR(predict(c, candidate(1, 1, 2, "1f1b", 1, 1, {4}), m).pipeline_seconds, 20 * 2.0,
              1e-6);
}

// With a throughput curve each product runs at the rate of its own size, in the run's precision:
// here the small model's products (4 weight GEMMs, 2 attention, the head's) of 0.5-2 MFLOP on a
// curve from 1e5 FLOP/s at 1e6 FLOPs to 1e9 at 1e8, against the same sums at hand-computed
// rates; a precision with no curve falls back to matmul_flops, and none at all is an error.
TEST(Planner, MachineFileCurvesPriceEachProductAtItsSize) {
  RunConfig c = small_config();
  Profile m;
  m.source = "machine";
  m.name = "curvy";
  m.ranks_per_node = 8;
  m.memory_bandwidth = 1e30;
  m.intra = CommCosts{kFree, kFree, kFree, kFree};
  m.matmul_curves["bf16"] = {{1e6, 1e5}, {1e8, 1e9}};
  const double N = 16, C = 32, T = 16, V = 256;
  // log-log between the points: rate = 1e5 * (flops / 1e6)^2 for flops in [1e6, 1e8].
  const auto at = [](double flops) {
    const double rate = flops <= 1e6 ? 1e5 : 1e5 * (flops / 1e6) * (flops / 1e6);
    return flops / rate;
  };
  const double weights = at(2 * N * C * 3 * C) + at(2 * N * C * C) + 2 * at(2 * N * C * 4 * C);
  const double attention = 2 * at(2 * N * T * C), head = at(2 * N * C * V);
  const double want = 4 * (3 * weights + 3 * attention) + 3 * head;
  const Candidate one = candidate(1, 1, 1, "1f1b", 1, 1, {4});
  c.train.precision = "bf16";
  EXPECT_NEAR(predict(c, one, m).step_seconds, want, 1e-9 * want);
  // fp32 has no curve: every product at matmul_flops.
  m.matmul_flops = 1e9;
  c.train.precision = "fp32";
  const double block_f = (2 * N * 12 * C * C + 4 * N * T * C) / 1e9;
  const double block_b = 2 * block_f, head_f = 2 * N * C * V / 1e9;
  EXPECT_NEAR(predict(c, one, m).step_seconds, 4 * (block_f + block_b) + 3 * head_f, 1e-12);
  m.matmul_flops = 0;
  const std::string want_error = "machine file 'curvy' gives no GEMM throughput for fp32: add a "
                                 "'matmul.fp32' curve or 'matmul_flops'";
  try {
    predict(c, one, m);
    ADD_FAILURE() << "a precision with no throughput was priced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want_error), std::string::npos) << e.what();
  }
  // The search says so once, as the file's fault, instead of refusing every layout for it.
  try {
    plan_layouts(c, make_request(4, 0, 8), m);
    ADD_FAILURE() << "a search priced layouts without a throughput";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want_error), std::string::npos) << e.what();
  }
}

TEST(Planner, RecomputationRunsTheForwardAgainAndKeepsOnlyBlockInputs) {
  RunConfig c = small_config();
  const Profile p = hand_profile(c);
  PricingOptions again;
  again.recompute = true;
  // One rank, m = 3: each backward runs the 4 blocks' forward (4 s) again.
  const Candidate one = candidate(1, 1, 1, "1f1b", 1, 3, {4});
  EXPECT_DOUBLE_EQ(predict(c, one, p, again).step_seconds, predict(c, one, p).step_seconds + 3 * 4);
  // Saved activations: B T C per block per micro-batch in flight, far below the whole block's.
  const Candidate piped = candidate(1, 2, 1, "1f1b", 2, 4, {2, 2});
  EXPECT_LT(predict(c, piped, p, again).memory_per_rank, predict(c, piped, p).memory_per_rank);
  // Block inputs are held as long as the schedule holds its micro-batches: gpipe all m of them,
  // 1f1b pp. From m = 4 to 8, gpipe's stages keep 4 more micro-batches' inputs of their 2
  // blocks than 1f1b's do, and more (gpipe's stage transfers grow by 4 more buffers too; the
  // pricing before counted min(pp, m) micro-batches for both, and only the transfers differed).
  const auto growth = [&](const std::string& schedule) {
    return predict(c, candidate(1, 2, 1, schedule, 2, 8, {2, 2}), p, again).memory_per_rank -
           predict(c, candidate(1, 2, 1, schedule, 2, 4, {2, 2}), p, again).memory_per_rank;
  };
  const double block_input = 2.0 * c.model.seq_len * c.model.d_model * p.activation_bytes;
  EXPECT_GE(growth("gpipe") - growth("1f1b"), 4 * 2 * block_input);
}

TEST(Planner, SearchHonoursALayoutAndAMicroBatchLimit) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  PlanRequest req = make_request(4, 0, 8);
  req.layout = parallel::Layout{2, 2, 1};
  req.max_micro_batch = 2;
  p.ops.push_back(OpEntry{1, 4, p.ops[1].block, p.ops[1].embedding, p.ops[1].head});
  const PlanResult r = plan_layouts(c, req, p);
  ASSERT_FALSE(r.ranked.empty());
  for (const Ranked& x : r.ranked) {
    EXPECT_EQ(x.candidate.layout, (parallel::Layout{2, 2, 1}));
    EXPECT_LE(x.candidate.micro_batch, 2);
  }
}

// A measured profile's memory per rank is its node's memory shared by its ranks: planned for
// nodes with twice the ranks, each has half (it used to keep the profile's, and gridlm train's
// auto layout then picked a layout that its own start-up refused).
TEST(Planner, MemoryPerRankFollowsTheRanksPerNode) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  PlanRequest req = make_request(2, 0, 8);
  req.layout = parallel::Layout{2, 1, 1};
  const PlanResult free_run = plan_layouts(c, req, p);
  ASSERT_FALSE(free_run.ranked.empty());
  double least = 1e300;
  for (const Ranked& x : free_run.ranked)
    least = std::min(least, x.prediction.memory_per_rank);
  p.memory_per_rank = 1.5 * least; // fits with the profile's 8 ranks per node
  req.ranks_per_node = 8;
  EXPECT_FALSE(plan_layouts(c, req, p).ranked.empty());
  req.ranks_per_node = 16; // 0.75 x least each: nothing fits
  const PlanResult crowded = plan_layouts(c, req, p);
  EXPECT_TRUE(crowded.ranked.empty());
  ASSERT_FALSE(crowded.refused.empty());
  EXPECT_NE(crowded.refused.front().reason.find("GiB"), std::string::npos)
      << crowded.refused.front().reason;
}

// gridlm train's auto axes on one stage with parallel.schedule = zb-h1: the planner prices one
// stage as 1f1b, whose fused backward holds less than zb-h1's split one. With memory between the
// two for micro-batches of 2 (here the faster size), the layout chosen must fit as it will run:
// micro-batches of 1. It chose 2, which the run's own start-up then refused.
TEST(Planner, AutoLayoutOnOneStageFitsTheConfiguredSchedule) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  for (OpEntry& e : p.ops) {
    if (e.micro_batch != 2) continue;
    for (OpTimes* t : {&e.block, &e.embedding, &e.head})
      *t = OpTimes{0.8 * t->forward, 0.8 * t->backward, 0.8 * t->backward_input,
                   0.8 * t->backward_weight};
  }
  Candidate fused = candidate(1, 1, 1, "1f1b", 2, 4, {4}), split = fused;
  split.schedule = "zb-h1";
  const double holds = predict(c, fused, p).memory_per_rank;
  const double split_holds = predict(c, split, p).memory_per_rank;
  ASSERT_LT(holds, split_holds);
  p.memory_per_rank = 0.5 * (holds + split_holds);
  const LinkCost fast{0, 1e15}; // the fastest link a file may hold
  p.intra = CommCosts{fast, fast, fast, fast};
  const std::string path = fmt::format("/tmp/gridlm_test_profile_{}.json", ::getpid());
  write_profile(path, p);
  c.parallel.dp = "auto";
  c.parallel.schedule = "zb-h1";
  c.parallel.profile = path;
  const AutoLayout chosen = plan_auto_layout(c, MPI_COMM_WORLD);
  std::remove(path.c_str());
  EXPECT_EQ(chosen.config.parallel.schedule, "zb-h1");
  EXPECT_EQ(chosen.config.train.micro_batch, 1) << chosen.report;
}

TEST(Planner, ProfileOfAnotherModelOrSizeIsNamed) {
  RunConfig c = small_config();
  const Profile p = hand_profile(c);
  RunConfig wider = c;
  wider.model.d_model = 64;
  try {
    predict(wider, candidate(1, 1, 1, "1f1b", 1, 1, {4}), p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("measure a profile of this model"), std::string::npos);
  }
  // A profile timed in one precision does not price a run in the other.
  RunConfig bf16 = c;
  bf16.train.precision = "bf16";
  try {
    predict(bf16, candidate(1, 1, 1, "1f1b", 1, 1, {4}), p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the profile timed fp32 products; this configuration's "
                                         "train.precision is bf16"),
              std::string::npos)
        << e.what();
  }
  try {
    predict(c, candidate(1, 1, 1, "1f1b", 4, 1, {4}), p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--micro-batches 4"), std::string::npos) << e.what();
  }
}

TEST(Planner, SearchReturnsOnlyWhatTheEngineRunsBestFirst) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  p.ranks_per_node = 2;
  // Two nodes: a profile without costs across nodes cannot price them.
  try {
    plan_layouts(c, make_request(4, 0, 4), p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no costs across nodes"), std::string::npos);
  }
  p.inter = CommCosts{kFree, kFree, kFree, kFree};
  const PlanResult r = plan_layouts(c, make_request(4, 0, 4), p);
  EXPECT_EQ(r.global_batch, 4);
  ASSERT_FALSE(r.ranked.empty());
  int refused = 0;
  for (const Refusal& f : r.refused)
    refused += f.count;
  EXPECT_EQ(refused + int(r.ranked.size()), r.considered);
  bool tp4_refused = false;
  for (const Refusal& f : r.refused)
    tp4_refused |= f.example.layout.tp == 4 && f.reason.find("span nodes") != std::string::npos;
  EXPECT_TRUE(tp4_refused);
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const Candidate& cand = r.ranked[i].candidate;
    SCOPED_TRACE(cand.str());
    EXPECT_EQ(candidate_problem(c, cand, p), "");
    EXPECT_LE(cand.layout.tp, 2);
    EXPECT_EQ(cand.layout.dp * cand.micro_batch * cand.micro_batches, 4);
    if (cand.schedule == "interleaved-1f1b") {
      EXPECT_EQ(cand.micro_batches % cand.layout.pp, 0);
    }
    if (i > 0) {
      EXPECT_GE(r.ranked[i - 1].prediction.tokens_per_second,
                r.ranked[i].prediction.tokens_per_second);
    }
  }
  // Free communication and tp at 80%: 4 replicas of micro-batch 1 are best.
  EXPECT_EQ(r.ranked.front().candidate.layout.dp, 4);
}

// The search makes each pipeline plan once and shares it among the candidates of the same
// schedule, pp, micro-batches and chunks: what it ranks must be what each candidate priced
// alone (a plan of its own) gives, to the bit, across every schedule and chunk count; and each
// its own balanced stage layout.
TEST(Planner, SearchPricesEachCandidateAsItAlonePricesIt) {
  RunConfig c = small_config();
  c.model.n_layer = 8;
  const Profile p = hand_profile(c);
  const PlanResult r = plan_layouts(c, make_request(8, 8, 16), p);
  std::set<std::tuple<std::string, int, int, int>> plans;
  for (const Ranked& ranked : r.ranked) {
    const Candidate& cand = ranked.candidate;
    SCOPED_TRACE(cand.str());
    plans.emplace(cand.schedule, cand.layout.pp, cand.micro_batches, cand.chunks);
    EXPECT_EQ(cand.stage_blocks,
              parallel::plan_stage_blocks(layers::stage_cost_model(c.model),
                                          cand.layout.pp * cand.chunks, "balanced"));
    const Prediction alone = predict(c, cand, p);
    EXPECT_DOUBLE_EQ(ranked.prediction.step_seconds, alone.step_seconds);
    EXPECT_DOUBLE_EQ(ranked.prediction.bubble, alone.bubble);
    EXPECT_DOUBLE_EQ(ranked.prediction.memory_per_rank, alone.memory_per_rank);
  }
  EXPECT_GT(plans.size(), 20u) << "schedules, chunk and micro-batch counts in the search";
  EXPECT_LT(plans.size(), r.ranked.size()) << "candidates that share a plan";
}

TEST(Planner, MemoryRefusesWhatDoesNotFit) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  const MemoryEstimate one = estimate_memory(c, parallel::Layout{1, 1, 1});
  p.memory_per_rank = one.weights; // less than any layout of 1 rank needs
  const PlanResult r = plan_layouts(c, make_request(1, 0, 2), p);
  EXPECT_TRUE(r.ranked.empty());
  ASSERT_FALSE(r.refused.empty());
  EXPECT_NE(r.refused.front().reason.find("does not fit in memory"), std::string::npos);
}

// validate() refuses a validation that keeps more than 1 GiB of tokens on a replica, which
// depends on the layout (a replica's share of the global batch): the search refuses such
// layouts too (gridlm train's auto layout stopped with validate()'s message instead of taking
// the next one).
TEST(Planner, LayoutsWhoseValidationDoesNotFitAreRefused) {
  RunConfig c = small_config();
  c.model.seq_len = 1023; // samples of 1024 tokens, 4 KiB
  c.train.eval_every = 10;
  c.train.eval_batches = 4096;
  // 256 sequences a step: a replica of dp 4 keeps 4096 x 64 x 4 KiB = 1024 MiB, dp 2 twice that.
  const PlanResult r = plan_layouts(c, make_request(4, 0, 256), hand_profile(c));
  ASSERT_FALSE(r.ranked.empty());
  for (const Ranked& ranked : r.ranked) {
    SCOPED_TRACE(ranked.candidate.str());
    EXPECT_EQ(ranked.candidate.layout.dp, 4);
    EXPECT_EQ(validation_memory_problem(with_candidate(c, ranked.candidate).train, 1023), "");
  }
  bool named = false;
  for (const Refusal& f : r.refused)
    named |=
        f.example.layout.dp < 4 && f.reason.find("lower train.eval_batches") != std::string::npos;
  EXPECT_TRUE(named);
}

// A global batch of a million sequences at micro-batch 1 would lay out a schedule of a million
// micro-batches per candidate (gigabytes at 2e9) before refusing it: refused before, by count.
TEST(Planner, TooManyMicroBatchesAreRefusedBeforeTheirScheduleIsMade) {
  RunConfig c = small_config();
  PlanRequest req = make_request(1, 0, 1 << 20);
  req.max_micro_batch = 1;
  const PlanResult r = plan_layouts(c, req, hand_profile(c));
  EXPECT_TRUE(r.ranked.empty());
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused.front().reason.find("1048576 micro-batches of 1 per replica, more than the "
                                          "4096 a step can take"),
            std::string::npos)
      << r.refused.front().reason;
  req.global_batch = 4096; // at the limit: priced (or refused for another reason)
  for (const Refusal& f : plan_layouts(c, req, hand_profile(c)).refused)
    EXPECT_EQ(f.reason.find("a step can take"), std::string::npos) << f.reason;
}

// With one rank per node nothing inside a node was measured: a plan for fuller nodes says its
// links there are priced as free (gpu_check.sh plans an 8-GPU node from one GPU's profile).
TEST(Planner, AOneRankPerNodeProfileSaysItsNodeLinksAreUnmeasured) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  p.ranks = 1;
  p.ranks_per_node = 1;
  p.inter = p.intra;
  EXPECT_EQ(plan_layouts(c, make_request(2, 0, 8), p).caveat, "") << "one rank a node, as timed";
  const std::string caveat = plan_layouts(c, make_request(2, 2, 8), p).caveat;
  EXPECT_NE(caveat.find("measured with one rank per node, so the links inside a node that 2 "
                        "ranks per node use are not measured and are priced as free"),
            std::string::npos)
      << caveat;
  p.ranks_per_node = 2;
  EXPECT_EQ(plan_layouts(c, make_request(4, 4, 8), p).caveat, "") << "a node link was timed";
}

// A pipeline's transfer buffers: MPI posts a step's receives up front, NCCL (a profile timed on
// it, unless the run asks for MPI) in per-op groups where they are proven deadlock-free; many
// micro-batches fit only then.
TEST(Planner, StageTransfersWeighAsTheBackendPostsThem) {
  RunConfig c = small_config();
  Profile p = hand_profile(c);
  const Candidate piped = candidate(1, 2, 1, "1f1b", 1, 32, {2, 2});
  const RunConfig r = with_candidate(c, piped);
  const double up_front = estimate_memory(r, piped.layout).total();
  const double grouped = estimate_memory(r, piped.layout, true).total();
  ASSERT_LT(grouped, up_front);
  p.memory_per_rank = (grouped + up_front) / 2;
  EXPECT_NE(candidate_problem(c, piped, p).find("does not fit in memory"), std::string::npos);
  EXPECT_DOUBLE_EQ(predict(c, piped, p).memory_per_rank, up_front);
  p.comm_backend = "nccl";
  EXPECT_EQ(candidate_problem(c, piped, p), "");
  EXPECT_DOUBLE_EQ(predict(c, piped, p).memory_per_rank, grouped);
  c.parallel.backend = "mpi";
  EXPECT_DOUBLE_EQ(predict(c, piped, p).memory_per_rank, up_front) << "MPI asked for";
}

TEST(Planner, DefaultGlobalBatchIsTheConfiguration) {
  RunConfig c = small_config(); // micro_batch 2 x grad_accum 4, dp auto
  EXPECT_EQ(configured_global_batch(c, 4, 4), 2 * 4 * 4);
  c.parallel.tp = "2";
  EXPECT_EQ(configured_global_batch(c, 4, 4), 2 * 4 * 2);
}

} // namespace
} // namespace gridlm::engine
