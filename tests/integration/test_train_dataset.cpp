// Training on a tokenized dataset file: data parallelism and tensor parallelism reproduce the
// single-rank run on the same file (the same samples in the same order, whatever the layout),
// the loss falls, and a model vocabulary smaller than the dataset's is refused on every rank.
// A validation that would read more samples than the validation split holds is named at
// start-up; the validation loss is the same in every layout of the same global batch. Runs at 2
// and 4 ranks.
//
// Tolerance: |loss_layout - loss_1| <= 1e-4 * loss_1 at every one of 20 AdamW steps; validation
// losses 1e-5 relative.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "engine/data.hpp"
#include "engine/trainer.hpp"
#include "engine/validation.hpp"
#include "parallel/grid.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

engine::RunConfig config_for(const std::string& path, int micro_batch) {
  engine::RunConfig c;
  c.model.vocab_size = 304; // the dataset's 300, rounded up as a model may
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
  c.data.source = path;
  c.output.dir = "";
  c.output.metrics = "";
  c.output.weights = "";
  return c;
}

void expect_same_losses(const engine::TrainResult& a, const engine::TrainResult& one) {
  ASSERT_EQ(a.losses.size(), one.losses.size());
  for (std::size_t s = 0; s < one.losses.size(); ++s)
    EXPECT_NEAR(a.losses[s], one.losses[s], 1e-4 * one.losses[s]) << "step " << s;
}

class TrainDataset : public testing::Test {
protected:
  void SetUp() override {
    path_ = test::shared_path("train");
    test::write_synthetic_dataset(path_, 120, 0);
  }
  void TearDown() override { test::remove_on_rank0(path_); }
  std::string path_;
};

} // namespace

TEST_F(TrainDataset, DataParallelMatchesOneRank) {
  const int n = test::world_size();
  ASSERT_EQ(8 % n, 0) << "register at a rank count dividing 8";
  parallel::GridOptions all;
  all.layout = {n, 1, 1};
  const engine::TrainResult dp =
      engine::train(config_for(path_, 8 / n), parallel::Grid::create(MPI_COMM_WORLD, all));
  const engine::TrainResult one =
      engine::train(config_for(path_, 8), parallel::Grid::create(MPI_COMM_SELF, {}));
  expect_same_losses(dp, one);
  EXPECT_LT(one.losses.back(), one.losses.front() - 0.5);
}

TEST_F(TrainDataset, TensorParallelMatchesOneRank) {
  const int n = test::world_size();
  parallel::GridOptions grid;
  grid.layout = {n / 2, 1, 2}; // tp 2, and dp 2 x tp 2 on 4 ranks
  const engine::TrainResult tp =
      engine::train(config_for(path_, 8 / (n / 2)), parallel::Grid::create(MPI_COMM_WORLD, grid));
  const engine::TrainResult one =
      engine::train(config_for(path_, 8), parallel::Grid::create(MPI_COMM_SELF, {}));
  expect_same_losses(tp, one);
}

TEST_F(TrainDataset, ModelVocabularyMustCoverTheDataset) {
  engine::RunConfig c = config_for(path_, 2);
  c.model.vocab_size = 256;
  parallel::GridOptions all;
  all.layout = {test::world_size(), 1, 1};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, all);
  const std::string msg = test::collective_error([&] { engine::train(c, grid); });
  EXPECT_NE(msg.find(fmt::format("ranks 0-{}: dataset '{}' has a vocabulary of 300 tokens but "
                                 "model.vocab_size = 256",
                                 test::world_size() - 1, path_)),
            std::string::npos)
      << msg;
}

// The validation loss reads the split's first train.eval_batches global batches whatever the
// layout: n replicas of micro-batches of 8/n accumulating 2 and one rank of micro-batches of 2
// accumulating 8 (16 sequences a step both; the one rank validates each global batch in two
// forward-only steps of 4) report the same validation losses.
TEST_F(TrainDataset, ValidationReadsTheSameSamplesInEveryLayout) {
  const std::string path = path_ + ".same";
  test::write_synthetic_dataset(path, 120, 3);
  const int n = test::world_size();
  ASSERT_EQ(8 % n, 0) << "register at a rank count dividing 8";
  parallel::GridOptions all;
  all.layout = {n, 1, 1};
  engine::RunConfig c = config_for(path, 8 / n);
  c.train.steps = 10;
  c.train.eval_every = 5;
  c.train.eval_batches = 2;
  const engine::TrainResult dp = engine::train(c, parallel::Grid::create(MPI_COMM_WORLD, all));
  c.train.micro_batch = 2;
  c.train.grad_accum = 8;
  const engine::TrainResult one = engine::train(c, parallel::Grid::create(MPI_COMM_SELF, {}));
  test::remove_on_rank0(path);
  expect_same_losses(dp, one);
  ASSERT_EQ(dp.val_losses.size(), 2u);
  ASSERT_EQ(one.val_losses.size(), 2u);
  for (std::size_t i = 0; i < one.val_losses.size(); ++i) {
    EXPECT_EQ(dp.val_losses[i].first, one.val_losses[i].first);
    EXPECT_NEAR(dp.val_losses[i].second, one.val_losses[i].second, 1e-5 * one.val_losses[i].second)
        << "validation at step " << one.val_losses[i].first;
  }
}

// Past the split's samples a validation reads its next epoch: the start-up report says so and
// how many batches fit; none fitting asks for a larger split or no validation.
TEST_F(TrainDataset, AValidationLargerThanItsSplitIsNamed) {
  const std::string path = path_ + ".valid";
  test::write_synthetic_dataset(path, 120, 4); // every 4th document held out
  const int n = test::world_size();
  parallel::GridOptions all;
  all.layout = {n, 1, 1};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, all);
  engine::RunConfig c = config_for(path, 2);
  c.train.eval_every = 5;
  const engine::RunData data = engine::open_data(c, grid);
  ASSERT_TRUE(data.valid && data.valid->extent());
  const std::uint64_t samples = data.valid->extent()->samples;
  const int fit = int(samples / std::uint64_t(n * c.train.micro_batch * c.train.grad_accum));
  ASSERT_GE(fit, 1) << samples << " validation samples";
  c.train.eval_batches = fit;
  EXPECT_EQ(engine::validation_shortfall(data, c, grid), "") << "they fit";
  c.train.eval_batches = fit + 1;
  const std::string note = engine::validation_shortfall(data, c, grid);
  EXPECT_NE(note.find(fmt::format("holds {}: the other", samples)), std::string::npos) << note;
  EXPECT_NE(note.find(fmt::format("set train.eval_batches = {} to read each once", fit)),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("each read up to 2 times in one loss"), std::string::npos) << note;
  // Past three times the split: some samples are read four times or more.
  const std::uint64_t batch = std::uint64_t(n * c.train.micro_batch * c.train.grad_accum);
  c.train.eval_batches = int(3 * samples / batch) + 1;
  const std::uint64_t need = std::uint64_t(c.train.eval_batches) * batch;
  const std::uint64_t times = (need + samples - 1) / samples;
  ASSERT_GE(times, 4u);
  const std::string many = engine::validation_shortfall(data, c, grid);
  EXPECT_NE(many.find(fmt::format("each read up to {} times in one loss", times)),
            std::string::npos)
      << many;
  c.train.micro_batch = int(samples) + 1;
  const std::string none = engine::validation_shortfall(data, c, grid);
  EXPECT_NE(none.find("or set train.eval_every = 0"), std::string::npos) << none;
  c.train.eval_every = 0;
  EXPECT_EQ(engine::validation_shortfall(data, c, grid), "") << "no validation, no note";
  test::remove_on_rank0(path);
}
