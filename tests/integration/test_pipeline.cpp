// The pipeline executor reproduces the single-rank model: for every schedule kind, pp = the
// world size (2 or 4; interleaved with 2 chunks per stage) gives the same loss and the same
// gradient for every parameter (compared on the rank that holds it, tied embedding copies
// included, tensor shards gathered) as one rank accumulating the same micro-batches, after one
// step, and the same losses over 20 AdamW steps. Also: transfers in NCCL's per-op groups (run
// over MPI here), uneven and balanced stage layouts, tp = 2 x pp = world / 2, refused layouts,
// the step timing, and the forward-only validation loss. Registered at 2 and 4 ranks.
//
// Tolerances (ref = one rank): step 1 loss |d| <= 1e-5 |ref|, gradients max|d| <= 1e-4 max|ref|
// + 1e-7 per tensor; losses over 20 steps |d| <= 1e-4 |ref|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "engine/memory_budget.hpp"
#include "engine/pipeline_model.hpp"
#include "layers/adamw.hpp"
#include "parallel/schedule_transfers.hpp"
#include "parallel/stage_layout.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;
using namespace gridlm::layers;

namespace {

layers::ModelConfig model() {
  layers::ModelConfig m;
  m.vocab_size = 37;
  m.seq_len = 12;
  m.n_layer = 8;
  m.n_head = 2;
  m.d_model = 16;
  return m;
}

// How a check runs the pipeline: explicit blocks per virtual stage (empty: uniform), and stage
// transfers in NCCL's per-op groups (here over MPI).
struct Options {
  std::vector<int> stage_blocks;
  bool grouped_transfers = false;
};

std::vector<int> plan_blocks(const layers::ModelConfig& m, int Q, const std::string& layout) {
  return parallel::plan_stage_blocks(layers::stage_cost_model(m), Q, layout);
}

void fill(int step, int micro, std::vector<std::int32_t>& seq, int V) {
  for (std::size_t i = 0; i < seq.size(); ++i) {
    seq[i] = std::int32_t((i * 7 + std::size_t(micro) * 13 + std::size_t(step) * 5) % V);
  }
}

// The first and the last stage's copies of wte end the step with the same gradient, bit for bit
// (the optimizer then keeps the copies equal).
void expect_tied_copies_equal(engine::PipelineModel& model, const parallel::Grid& grid) {
  const int pp = grid.layout().pp, stage = grid.coords().pp;
  if (pp == 1) return;
  const auto comm = grid.make_mpi_comm(parallel::Axis::pp);
  auto copy = [](parallel::Stage& s) {
    const Span<float> g = s.tied_embedding_grad();
    std::vector<float> host(g.size());
    s.copy_to_host(host.data(), g.data(), g.size());
    return host;
  };
  if (stage == 0) {
    const std::vector<float> first = copy(*model.chunks().front());
    comm->send(Span<const float>(first), pp - 1, 7);
  } else if (stage == pp - 1) {
    const std::vector<float> last = copy(*model.chunks().back());
    std::vector<float> first(last.size());
    comm->recv(Span<float>(first), 0, 7);
    ASSERT_FALSE(last.empty());
    EXPECT_EQ(0, std::memcmp(first.data(), last.data(), last.size() * sizeof(float)))
        << "the tied copies' gradients differ";
  }
}

void check(parallel::ScheduleKind kind, int chunks, bool tied, Options options = {}, int tp = 1) {
  const int n = test::world_size(), m = 8, B = 2, T = 12, pp = n / tp;
  layers::ModelConfig mc = model();
  mc.tied_embeddings = tied;
  parallel::GridOptions o;
  o.layout = {1, pp, tp};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, o);
  const auto tp_comm = tp > 1 ? grid.make_mpi_comm(parallel::Axis::tp) : nullptr;
  const parallel::Schedule schedule = parallel::make_schedule(kind, pp, m, chunks);
  const parallel::PipelinePlan plan = parallel::plan_pipeline(
      schedule, 3,
      options.grouped_transfers ? parallel::Transfers::grouped : parallel::Transfers::up_front);
  const std::vector<int> blocks =
      options.stage_blocks.empty() ? plan_blocks(mc, pp * chunks, "uniform") : options.stage_blocks;
  engine::PipelineModel model(mc, B, T, grid, plan, blocks, tp_comm.get(), 5);
  parallel::Executor& pipe = model.executor();
  GPT whole(mc, B, T);
  init_parameters(whole.params(), whole.table(), 5);
  std::vector<std::unique_ptr<AdamW>> opts;
  for (auto& g : model.chunks())
    opts.push_back(std::make_unique<AdamW>(OptimizerConfig{}, g->table()));
  AdamW whole_opt(OptimizerConfig{}, whole.table());
  OptimizerConfig oc;
  oc.decay_steps = 20;

  std::vector<std::int32_t> seq(B * (T + 1)), x(B * T), y(B * T);
  auto boundary_buffers = [&] { // made and taken, over this rank's chunks
    std::pair<std::size_t, std::size_t> count{0, 0};
    for (auto& g : model.chunks()) {
      count.first += g->boundary_pool().made();
      count.second += g->boundary_pool().taken();
    }
    return count;
  };
  std::size_t taken_by_one_step = 0;
  for (int step = 0; step < 20; ++step) {
    pipe.zero_grad();
    const double loss = pipe.step(
        [&](int micro, std::vector<std::int32_t>& s) { fill(step, micro, s, mc.vocab_size); },
        1.0f / m);
    whole.zero_grad();
    double ref = 0.0;
    for (int micro = 0; micro < m; ++micro) {
      fill(step, micro, seq, mc.vocab_size);
      for (int b = 0; b < B; ++b) {
        std::copy(seq.begin() + b * (T + 1), seq.begin() + b * (T + 1) + T, x.begin() + b * T);
        std::copy(seq.begin() + b * (T + 1) + 1, seq.begin() + (b + 1) * (T + 1),
                  y.begin() + b * T);
      }
      ref += whole.forward(x.data(), y.data(), B, T) / m;
      whole.backward(1.0f / m);
    }
    EXPECT_NEAR(loss, ref, (step == 0 ? 1e-5 : 1e-4) * ref) << "step " << step;
    if (step == 0) {
      for (auto& g : model.chunks()) {
        for (const ParamInfo& p : g->table().params) {
          const std::vector<float> got = gather_parameter(p, g->grads(), tp_comm.get());
          const ParamInfo& wp = whole.table().params[std::size_t(whole.table().find(p.name))];
          const std::vector<float> want = gather_parameter(wp, whole.grads(), nullptr);
          ASSERT_EQ(got.size(), want.size()) << p.name;
          float worst = 0.0f, scale = 0.0f;
          for (std::size_t i = 0; i < got.size(); ++i) {
            worst = std::max(worst, std::fabs(got[i] - want[i]));
            scale = std::max(scale, std::fabs(want[i]));
          }
          EXPECT_LE(worst, 1e-4f * scale + 1e-7f) << p.name;
        }
      }
      if (tied) expect_tied_copies_equal(model, grid);
      EXPECT_NEAR(pipe.grad_norm_squared(tp_comm.get()), whole.grad_sum_of_squares(),
                  1e-4 * whole.grad_sum_of_squares());
      const parallel::PipelineTiming& timing = pipe.last_timing();
      EXPECT_GT(timing.seconds, 0.0);
      EXPECT_GE(timing.bubble, pp > 1 ? 0.0 : -1e-9);
      EXPECT_LT(timing.bubble, 1.0);
      if (pp > 1) {
        EXPECT_GT(timing.predicted_bubble, 0.0) << "a pipeline always idles a little";
      }
      EXPECT_LT(timing.predicted_bubble, 1.0);
    }
    if (step == 0) taken_by_one_step = boundary_buffers().second;
    const double norm = std::sqrt(pipe.grad_norm_squared(tp_comm.get()));
    for (std::size_t c = 0; c < opts.size(); ++c) {
      opts[c]->update(model.chunks()[c]->params(), model.chunks()[c]->grads(), step,
                      learning_rate(oc, step), norm);
    }
    whole_opt.update(whole.params(), whole.grads(), step, learning_rate(oc, step),
                     std::sqrt(whole.grad_sum_of_squares()));
  }
  // Validation: forward only through the pipeline, the mean loss of 3 micro-batches.
  const double val = pipe.evaluate(
      [&](int micro, std::vector<std::int32_t>& s) { fill(100, micro, s, mc.vocab_size); });
  double ref = 0.0;
  for (int micro = 0; micro < 3; ++micro) {
    fill(100, micro, seq, mc.vocab_size);
    for (int b = 0; b < B; ++b) {
      std::copy(seq.begin() + b * (T + 1), seq.begin() + b * (T + 1) + T, x.begin() + b * T);
      std::copy(seq.begin() + b * (T + 1) + 1, seq.begin() + (b + 1) * (T + 1), y.begin() + b * T);
    }
    ref += whole.forward(x.data(), y.data(), B, T) / 3;
  }
  EXPECT_NEAR(val, ref, 1e-4 * ref) << "validation loss";
  // The transfers' buffers are reused: 20 steps allocate no more than one step takes (a GPU
  // would otherwise pay a cudaMalloc and a device-wide cudaFree per transfer).
  const auto [made, taken] = boundary_buffers();
  if (pp > 1) {
    EXPECT_GT(taken_by_one_step, 0u);
    EXPECT_GT(taken, 19 * taken_by_one_step);
  }
  EXPECT_LE(made, taken_by_one_step) << "boundary buffers made over 20 steps, of " << taken;
  // ... and no more than the plan counts and the memory estimate charges for them.
  EXPECT_LE(int(made), plan.boundary_buffers);
  engine::RunConfig run;
  run.model = mc;
  run.model.seq_len = T;
  run.train.micro_batch = B;
  run.train.grad_accum = m;
  run.parallel.schedule = parallel::schedule_name(kind);
  run.parallel.chunks = chunks;
  if (!options.grouped_transfers) {
    const double counted = engine::estimate_memory(run, {1, pp, tp}).transfers;
    EXPECT_LE(double(made) * 4 * B * T * mc.d_model, counted) << made << " buffers made";
  }
}

} // namespace

TEST(Pipeline, GPipeMatchesOneRank) { check(parallel::ScheduleKind::gpipe, 1, true); }
TEST(Pipeline, OneFOneBMatchesOneRank) { check(parallel::ScheduleKind::one_f_one_b, 1, true); }
TEST(Pipeline, OneFOneBUntiedMatchesOneRank) {
  check(parallel::ScheduleKind::one_f_one_b, 1, false);
}
TEST(Pipeline, InterleavedMatchesOneRank) { check(parallel::ScheduleKind::interleaved, 2, true); }
TEST(Pipeline, ZeroBubbleH1MatchesOneRank) { check(parallel::ScheduleKind::zb_h1, 1, true); }

TEST(Pipeline, GroupedTransfersMatchOneRank) {
  Options o;
  o.grouped_transfers = true;
  check(parallel::ScheduleKind::one_f_one_b, 1, true, o);
  check(parallel::ScheduleKind::zb_h1, 1, false, o);
}

TEST(Pipeline, UnevenAndBalancedLayoutsMatchOneRank) {
  const int n = test::world_size();
  Options o;
  o.stage_blocks.assign(std::size_t(n), 1); // model() has 8 blocks: the last stage takes the rest
  o.stage_blocks.back() = 8 - (n - 1);
  check(parallel::ScheduleKind::one_f_one_b, 1, true, o);
  o.stage_blocks = plan_blocks(model(), 2 * n, "balanced");
  check(parallel::ScheduleKind::interleaved, 2, true, o);
}

TEST(Pipeline, TensorTimesPipelineMatchesOneRank) {
  check(parallel::ScheduleKind::one_f_one_b, 1, true, {}, 2);
  check(parallel::ScheduleKind::zb_h1, 1, true, {}, 2);
}

TEST(Pipeline, GroupedTransfersRefusedWhereTheyCouldDeadlock) {
  const int n = test::world_size();
  parallel::GridOptions o;
  o.layout = {1, n, 1};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, o);
  // The first interleaved schedule whose grouped plan the checker finds could deadlock.
  parallel::Schedule schedule;
  for (int m = n; m <= 32 && schedule.ops.empty(); m += n) {
    for (int v = 2; v <= 4 && schedule.ops.empty(); ++v) {
      auto s = parallel::make_schedule(parallel::ScheduleKind::interleaved, n, m, v);
      if (!parallel::check_grouped_transfers(s).empty()) schedule = s;
    }
  }
  ASSERT_FALSE(schedule.ops.empty());
  const std::string msg = test::collective_error(
      [&] { parallel::plan_pipeline(schedule, 1, parallel::Transfers::grouped); });
  EXPECT_NE(msg.find("cannot run its stage transfers in NCCL groups"), std::string::npos) << msg;
}

// The executor checks the plan's schedules before it runs one: a list whose order cannot run
// (here the last stage's B0 before its F0) is refused on every rank instead of hanging.
TEST(Pipeline, AScheduleThatFailsItsCheckIsRefusedBeforeItRuns) {
  const int n = test::world_size();
  parallel::GridOptions o;
  o.layout = {1, n, 1};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, o);
  const layers::ModelConfig mc = model();
  parallel::PipelinePlan plan =
      parallel::plan_pipeline(parallel::make_schedule(parallel::ScheduleKind::one_f_one_b, n, 4), 4,
                              parallel::Transfers::up_front);
  std::vector<parallel::Op>& last = plan.train.ops[std::size_t(n - 1)];
  ASSERT_EQ(last[1].kind, parallel::OpKind::B);
  std::swap(last[0], last[1]);
  const std::string msg = test::collective_error([&] {
    engine::PipelineModel m(mc, 2, 12, grid, plan, plan_blocks(mc, n, "uniform"), nullptr, 5);
  });
  EXPECT_NE(msg.find(fmt::format("the 1f1b schedule ({} stages, 4 micro-batches, 1 chunks) cannot "
                                 "run: stage {}: B0 comes before F0",
                                 n, n - 1)),
            std::string::npos)
      << msg;
}

TEST(Pipeline, LayoutsThatDropOrRepeatBlocksAreRefused) {
  const int n = test::world_size();
  std::vector<int> stage_blocks(std::size_t(n), 1); // n < 8 blocks: some dropped
  const auto plan = [&] { plan_blocks(model(), n, parallel::stage_blocks_text(stage_blocks)); };
  std::string msg = test::collective_error(plan);
  EXPECT_NE(msg.find("every block must be assigned exactly once"), std::string::npos) << msg;
  stage_blocks.assign(std::size_t(n), 8); // too many: repeated
  msg = test::collective_error(plan);
  EXPECT_NE(msg.find("assigns " + std::to_string(8 * n) + " blocks"), std::string::npos) << msg;
}

TEST(Pipeline, BlocksThatDoNotDivideAreRefused) {
  const int n = test::world_size();
  layers::ModelConfig mc = model();
  mc.n_layer = 3 * n + 1;
  const std::string msg = test::collective_error([&] { plan_blocks(mc, n, "uniform"); });
  EXPECT_NE(msg.find("does not divide into parallel.pp x parallel.chunks"), std::string::npos)
      << msg;
}
