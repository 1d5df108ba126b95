// The whole training path on one rank learns the synthetic Markov language: within a bounded
// number of steps the loss falls well below the unigram entropy (what a model that ignores
// context reaches) towards the chain's entropy rate; and text sampled from the weights file it
// writes follows the chain: most drawn tokens are one of the four successors of the previous;
// the command line's Generator, reading the same file, draws the same tokens.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "engine/sampler.hpp"
#include "engine/trainer.hpp"
#include "engine/weights_file.hpp"
#include "io/synthetic_source.hpp"
#include "layers/gpt.hpp"
#include "parallel/grid.hpp"

using namespace gridlm;

TEST(Train, LearnsTheSyntheticLanguage) {
  engine::RunConfig c;
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
  c.train.optim.decay_steps = c.train.steps;
  c.output.dir = std::filesystem::temp_directory_path() /
                 ("gridlm_train_learns_" + std::to_string(::getpid()));
  c.output.metrics = "";
  c.output.weights = "model.h5";
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_SELF, {});
  const engine::TrainResult r = engine::train(c, grid);
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

  // Sample from the written weights: a model that knows the chain mostly draws successors.
  io::H5File file = io::H5File::open_read(c.output.dir + "/model.h5");
  const layers::ModelConfig m = engine::read_model_attributes(file);
  ASSERT_EQ(m.d_model, c.model.d_model);
  layers::GPT gpt(m, 1, m.seq_len);
  engine::load_weights(gpt, file);
  engine::SampleOptions o;
  o.tokens = 200;
  o.temperature = 1.0;
  o.top_k = 0;
  std::vector<std::int32_t> text{5};
  const std::vector<std::int32_t> drawn = engine::generate(gpt, text, o);
  text.insert(text.end(), drawn.begin(), drawn.end());
  int follows = 0;
  for (std::size_t i = 1; i < text.size(); ++i) {
    const auto& next = source.successors(text[i - 1]);
    follows += std::find(next.begin(), next.end(), text[i]) != next.end();
  }
  // A uniform draw would follow 4 / 64 of the time; the chain itself always.
  EXPECT_GT(follows, 160) << follows << " of 200 drawn tokens follow the chain";
  // The command line's Generator (its weights read once, checked against their checksums, into a
  // model without gradients) draws what the model itself draws, seed for seed.
  engine::Generator generator(c.output.dir + "/model.h5");
  EXPECT_EQ(generator.generate({5}, o), drawn);
  o.seed = 6;
  EXPECT_EQ(generator.generate({5}, o), engine::generate(gpt, {5}, o));
  std::filesystem::remove_all(c.output.dir);
}
