// Data parallelism reproduces the single-rank run: N replicas with micro-batches of 2 give the
// same per-step losses and gradient norms as one rank with micro-batches of 2N (the same
// samples, the gradients reduced), up to floating-point reordering: with one bucket, with
// small buckets reduced during the backward, and with ZeRO-1. Also: ZeRO-1's gather waited for
// between steps is not reported as the next step's. Runs at 2, 3 and 4 ranks.
//
// Tolerances, as in test_train_layouts: |d| <= 1e-6 |ref| for the loss and 1e-5 |ref| for the
// gradient norm at every one of 20 steps (fp32 reordering of the reduction).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/grad_sync.hpp"
#include "engine/trainer.hpp"
#include "parallel/grid.hpp"
#include "parallel/pipeline_plan.hpp"
#include "parallel/schedule.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;

namespace {

engine::RunConfig small_config(int micro_batch) {
  engine::RunConfig c;
  c.model.vocab_size = 32;
  c.model.seq_len = 16;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 16;
  c.train.micro_batch = micro_batch;
  c.train.grad_accum = 2;
  c.train.steps = 20;
  c.train.log_every = 100;
  c.train.optim.lr = 1e-2;
  c.train.optim.decay_steps = 20;
  c.output.dir = "";
  c.output.metrics = "";
  c.output.weights = "";
  return c;
}

// Each of n replicas takes micro-batches of 2 sequences; one rank takes 2n.
void expect_matches_one_rank(int zero, double bucket_mb) {
  const int n = test::world_size();
  parallel::GridOptions all;
  all.layout = {n, 1, 1};
  engine::RunConfig c = small_config(2);
  c.parallel.zero = zero;
  c.parallel.grad_bucket_mb = bucket_mb;
  const engine::TrainResult dp = engine::train(c, parallel::Grid::create(MPI_COMM_WORLD, all));
  const engine::TrainResult one =
      engine::train(small_config(2 * n), parallel::Grid::create(MPI_COMM_SELF, {}));
  ASSERT_EQ(dp.losses.size(), one.losses.size());
  for (std::size_t s = 0; s < one.losses.size(); ++s) {
    EXPECT_NEAR(dp.losses[s], one.losses[s], 1e-6 * one.losses[s]) << "step " << s;
    EXPECT_NEAR(dp.grad_norms[s], one.grad_norms[s], 1e-5 * one.grad_norms[s]) << "step " << s;
  }
  EXPECT_LT(one.losses.back(), one.losses.front());
}

// The model of small_config at dp = every rank, for GradSync's tests without a trainer.
struct DataParallelModel {
  parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, all_replicas());
  engine::RunConfig c = small_config(2);
  parallel::PipelinePlan plan =
      parallel::plan_pipeline(parallel::make_schedule(parallel::ScheduleKind::one_f_one_b, 1, 2, 1),
                              1, parallel::Transfers::up_front);
  engine::PipelineModel model{c.model, 2, c.model.seq_len, grid, plan, {c.model.n_layer},
                              nullptr, 5};

  static parallel::GridOptions all_replicas() {
    parallel::GridOptions all;
    all.layout = {test::world_size(), 1, 1};
    return all;
  }
};

} // namespace

TEST(Train, DataParallelMatchesOneRank) { expect_matches_one_rank(0, 4.0); }

// Buckets of 100 floats (rounded up to a multiple of dp) straddle every tensor; at dp 3 neither
// the buffer nor the first bucket divides by the replica count.
TEST(Train, SmallBucketsMatchOneRank) { expect_matches_one_rank(0, 100.0 * 4 / (1 << 20)); }
TEST(Train, ZeroMatchesOneRank) { expect_matches_one_rank(1, 100.0 * 4 / (1 << 20)); }
TEST(Train, ZeroWithOneBucketMatchesOneRank) { expect_matches_one_rank(1, 0.0); }

// ZeRO-1's parameter gather waited for between steps (before a validation or a save) is not
// the next step's: its gather_exposed counts only what that step's forward waited. One rank
// arrives late, so the others wait in wait_params(); no forward runs, so nothing is exposed.
TEST(Train, ZeroGatherWaitedBetweenStepsIsNotTheNextSteps) {
  const int n = test::world_size();
  DataParallelModel m;
  const parallel::Grid& grid = m.grid;
  engine::PipelineModel& model = m.model;
  engine::GradSync sync(grid, "mpi", model, 100.0 * 4 / (1 << 20), 1);
  for (int step = 0; step < 2; ++step) {
    sync.finish(1.0, nullptr);
    EXPECT_EQ(0.0, sync.last_timing().gather_exposed) << "step " << step;
    sync.gather_params();
    if (grid.rank() == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sync.wait_params();
  }
}

// Buckets that the backward did not start (here: no backward at all) start in finish(): the
// time they were in flight still covers the time the step waited for them (metrics.jsonl's
// dp_comm_ms and its part dp_exposed_ms), with and without ZeRO-1.
TEST(Train, ExposedReductionIsPartOfTheTimeInFlight) {
  DataParallelModel m;
  const parallel::Grid& grid = m.grid;
  engine::PipelineModel& model = m.model;
  for (int zero = 0; zero < 2; ++zero) {
    engine::GradSync sync(grid, "mpi", model, 4.0, zero);
    for (int step = 0; step < 3; ++step) {
      sync.finish(1.0, nullptr);
      EXPECT_GT(sync.last_timing().exposed, 0.0) << "zero " << zero << " step " << step;
      EXPECT_GE(sync.last_timing().in_flight, sync.last_timing().exposed)
          << "zero " << zero << " step " << step;
      if (zero == 1) {
        sync.gather_params();
        sync.wait_params();
      }
    }
  }
}
