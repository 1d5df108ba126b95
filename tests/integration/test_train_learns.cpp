// The whole training path on one rank learns the synthetic Markov language: within a bounded
// number of steps the loss falls well below the unigram entropy (what a model that ignores
// context reaches) towards the chain's entropy rate.
#include <gtest/gtest.h>

#include "app/trainer.hpp"
#include "io/synthetic_source.hpp"
#include "parallel/grid.hpp"

using namespace gridlm;

TEST(Train, LearnsTheSyntheticLanguage) {
  app::RunConfig c;
  c.model.vocab_size = 64;
  c.model.seq_len = 32;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.d_model = 64;
  c.train.micro_batch = 8;
  c.train.steps = 300;
  c.train.log_every = 50;
  c.train.optim.lr = 3e-3;
  c.train.optim.warmup_steps = 10;
  c.train.optim.total_steps = c.train.steps;
  c.output.dir = "";
  c.output.metrics = "";
  c.output.weights = "";
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_SELF, {});
  const app::TrainResult r = app::train(c, grid);
  const io::SyntheticSource source(c.model.vocab_size, std::uint64_t(c.data.seed));
  const double unigram = source.unigram_entropy();
  EXPECT_NEAR(r.first_loss, std::log(double(c.model.vocab_size)), 0.3)
      << "a fresh model predicts about uniformly";
  // Last 20 steps' mean, to be robust to one noisy batch.
  double tail = 0.0;
  for (std::size_t i = r.losses.size() - 20; i < r.losses.size(); ++i)
    tail += r.losses[i];
  tail /= 20.0;
  EXPECT_LT(tail, 0.5 * unigram) << "unigram entropy " << unigram << ", entropy rate "
                                 << source.entropy_rate();
  EXPECT_GT(tail, 0.9 * source.entropy_rate()) << "cannot beat the entropy rate";
}
