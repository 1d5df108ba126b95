// Data parallelism reproduces the single-rank run: N replicas with micro-batches of 8/N give the
// same per-step losses as one rank with micro-batches of 8 (the same samples, the gradients
// all-reduced), up to floating-point reordering. Runs at 2 and 4 ranks.
//
// Tolerance: |loss_dp - loss_1| <= 1e-4 * loss_1 at every one of 20 AdamW steps.
#include <gtest/gtest.h>

#include "engine/trainer.hpp"
#include "parallel/grid.hpp"
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

} // namespace

TEST(Train, DataParallelMatchesOneRank) {
  const int n = test::world_size();
  ASSERT_EQ(8 % n, 0) << "register at a rank count dividing 8";
  parallel::GridOptions all;
  all.layout = {n, 1, 1};
  const engine::TrainResult dp =
      engine::train(small_config(8 / n), parallel::Grid::create(MPI_COMM_WORLD, all));
  const engine::TrainResult one =
      engine::train(small_config(8), parallel::Grid::create(MPI_COMM_SELF, {}));
  ASSERT_EQ(dp.losses.size(), one.losses.size());
  for (std::size_t s = 0; s < one.losses.size(); ++s) {
    EXPECT_NEAR(dp.losses[s], one.losses[s], 1e-4 * one.losses[s]) << "step " << s;
  }
  EXPECT_LT(one.losses.back(), one.losses.front());
}
