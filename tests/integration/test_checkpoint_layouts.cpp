// Checkpoints reshard: a checkpoint written at tp 2 x pp 2 after 3 of 6 steps resumes at dp 4, at
// tp 4 and at pp 4 with interleaved-1f1b over 2 chunks (the same global batch), and each goes
// on along the loss curve of the uninterrupted tp 2 x pp 2 run within the layout tolerance
// (|d| <= 1e-4 |loss| at every step). --init-from starts a new run from a file's weights (a
// model that has learned, at step 0). Registered at 4 ranks.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/trainer.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;

namespace {

std::string shared_dir(const std::string& stem) {
  long id = test::world_rank() == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return "/tmp/gridlm_test_" + stem + "_" + std::to_string(id);
}

engine::RunConfig config(const std::string& dir, int steps, int micro_batch) {
  engine::RunConfig c;
  c.model.vocab_size = 64;
  c.model.seq_len = 8;
  c.model.n_layer = 8;
  c.model.n_head = 4;
  c.model.d_model = 16;
  c.train.micro_batch = micro_batch;
  c.train.grad_accum = 4;
  c.train.steps = steps;
  c.train.log_every = 100;
  c.train.optim.lr = 1e-2;
  c.train.optim.warmup_steps = 2;
  c.train.optim.decay_steps = 6;
  c.output.dir = dir;
  c.output.metrics = "";
  c.output.weights = "model.h5";
  return c;
}

parallel::Grid grid(int dp, int pp, int tp) {
  parallel::GridOptions o;
  o.layout = {dp, pp, tp};
  return parallel::Grid::create(MPI_COMM_WORLD, o);
}

} // namespace

TEST(CheckpointLayouts, ACheckpointResumesUnderOtherLayouts) {
  ASSERT_EQ(test::world_size(), 4) << "register at 4 ranks";
  const std::string dir = shared_dir("ckpt_layouts");
  const engine::TrainResult full = engine::train(config(dir + "/full", 6, 4), grid(1, 2, 2));
  engine::RunConfig half = config(dir + "/half", 3, 4);
  half.checkpoint.dir = "checkpoints";
  engine::train(half, grid(1, 2, 2));
  const std::string checkpoint = dir + "/half/checkpoints/step-000003.h5";
  struct Case {
    const char* name;
    int dp, pp, tp, micro_batch, chunks;
    const char* schedule;
  };
  for (const Case& k : {Case{"dp 4", 4, 1, 1, 1, 1, "1f1b"}, Case{"tp 4", 1, 1, 4, 4, 1, "1f1b"},
                        Case{"pp 4 interleaved", 1, 4, 1, 4, 2, "interleaved-1f1b"}}) {
    engine::RunConfig c = config(dir + "/" + k.name, 6, k.micro_batch);
    c.parallel.schedule = k.schedule;
    c.parallel.chunks = k.chunks;
    c.checkpoint.resume = checkpoint;
    const engine::TrainResult rest = engine::train(c, grid(k.dp, k.pp, k.tp));
    ASSERT_EQ(rest.losses.size(), 3u) << k.name;
    for (std::size_t s = 0; s < 3; ++s) {
      EXPECT_NEAR(rest.losses[s], full.losses[3 + s], 1e-4 * full.losses[3 + s])
          << k.name << ", step " << 3 + s;
    }
  }
  // A new run from the weights: step 0 of a model that has learned, the same loss whether the
  // replicas read whole tensors (dp 4) or the ranks of tp 2 x pp 2 read their shards of them
  // (a tensor loaded in part, or from another's place, differs by far more than 1e-4).
  engine::RunConfig fresh = config(dir + "/fresh", 1, 4), init = config(dir + "/init", 1, 4);
  init.checkpoint.init_from = dir + "/full/model.h5";
  const double untrained = engine::train(fresh, grid(4, 1, 1)).first_loss;
  const double trained = engine::train(init, grid(4, 1, 1)).first_loss;
  EXPECT_LT(trained, untrained - 0.1) << "--init-from did not load the learned weights";
  engine::RunConfig sharded = config(dir + "/init_sharded", 1, 16);
  sharded.checkpoint.init_from = init.checkpoint.init_from;
  const double trained_sharded = engine::train(sharded, grid(1, 2, 2)).first_loss;
  EXPECT_NEAR(trained_sharded, trained, 1e-4 * trained) << "the same weights read by shards";
  MPI_Barrier(MPI_COMM_WORLD);
  std::error_code ec;
  if (test::world_rank() == 0) std::filesystem::remove_all(dir, ec);
}

// ZeRO-1 shards of the moments are stored at the same global shapes as without ZeRO: a
// checkpoint written by dp 4 with ZeRO resumes at dp 2 x pp 2 without it, and one written
// without ZeRO resumes at dp 4 with it, each along the uninterrupted run's loss curve (|d| <=
// 1e-4 |loss|); a ZeRO checkpoint resumed under its own layout gives the same bits.
TEST(CheckpointLayouts, ZeroShardsLoadWithAndWithoutZero) {
  ASSERT_EQ(test::world_size(), 4) << "register at 4 ranks";
  const std::string dir = shared_dir("ckpt_zero");
  auto with = [](engine::RunConfig c, int zero) {
    c.parallel.zero = zero;
    c.parallel.grad_bucket_mb = 1e-3; // buckets of 262 floats: many, most of them uneven tensors
    return c;
  };
  const engine::TrainResult full =
      engine::train(with(config(dir + "/full", 6, 1), 1), grid(4, 1, 1));
  struct Case {
    const char* name;
    int write_dp, write_pp, write_zero, read_dp, read_pp, read_zero;
    bool bitwise;
  };
  const Case cases[] = {{"zero dp 4 -> dp 2 x pp 2", 4, 1, 1, 2, 2, 0, false},
                        {"dp 2 x pp 2 -> zero dp 4", 2, 2, 0, 4, 1, 1, false},
                        {"zero dp 4 -> zero dp 4", 4, 1, 1, 4, 1, 1, true}};
  for (const Case& k : cases) {
    const std::string out = dir + "/" + std::to_string(&k - cases);
    engine::RunConfig half = with(config(out, 3, 4 / k.write_dp), k.write_zero);
    half.checkpoint.dir = "checkpoints";
    engine::train(half, grid(k.write_dp, k.write_pp, 1));
    engine::RunConfig rest = with(config(out, 6, 4 / k.read_dp), k.read_zero);
    rest.checkpoint.dir = "checkpoints";
    rest.checkpoint.resume = "auto";
    const engine::TrainResult resumed = engine::train(rest, grid(k.read_dp, k.read_pp, 1));
    ASSERT_EQ(resumed.losses.size(), 3u) << k.name;
    for (std::size_t s = 0; s < 3; ++s) {
      if (k.bitwise) {
        EXPECT_EQ(resumed.losses[s], full.losses[3 + s]) << k.name << ", step " << 3 + s;
      } else {
        EXPECT_NEAR(resumed.losses[s], full.losses[3 + s], 1e-4 * full.losses[3 + s])
            << k.name << ", step " << 3 + s;
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::error_code ec;
  if (test::world_rank() == 0) std::filesystem::remove_all(dir, ec);
}
