// Sampling and weights files: the draw honours temperature, top-k and the drawable ids (a
// vocabulary padded past its tokenizer), generation stops at the stop id and refuses logits
// that are not finite; a weights file written from a model loads back bit for bit, and a file
// for another model is refused by name (the command line's Generator, which reads a real model
// file, is tested by test_train_learns).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/sampler.hpp"
#include "engine/weights_file.hpp"
#include "layers/gpt.hpp"
#include "parallel/diagnostics.hpp"
#include "tests/device_buffer.hpp"

using namespace gridlm;

TEST(Sampler, TemperatureZeroTakesTheMostLikelyAndTopKLimitsTheDraw) {
  const std::vector<float> logits{0.0f, 10.0f, 9.9f, -5.0f};
  engine::SampleOptions o;
  o.temperature = 0.0;
  EXPECT_EQ(engine::pick_token(logits, o, 0.99), 1);
  o.temperature = 1.0;
  o.top_k = 2;
  EXPECT_EQ(engine::pick_token(logits, o, 0.0), 1);
  EXPECT_EQ(engine::pick_token(logits, o, 0.999), 2);
  o.top_k = 0;
  // Without top-k the unlikely tokens keep their (tiny) share at the top of [0, 1).
  EXPECT_EQ(engine::pick_token(logits, o, 0.99999), 0);
  EXPECT_EQ(engine::pick_token(logits, o, 0.999999999), 3);
  o.top_k = 1;
  for (double u : {0.0, 0.5, 0.999})
    EXPECT_EQ(engine::pick_token(logits, o, u), 1);
}

namespace {

// Vocabulary 37 (padded to 40 rows in memory; a file holds 37), context 8, width 16.
layers::ModelConfig small_model(int layers) {
  layers::ModelConfig m;
  m.vocab_size = 37;
  m.seq_len = 8;
  m.n_layer = layers;
  m.n_head = 2;
  m.d_model = 16;
  return m;
}

} // namespace

TEST(WeightsFile, RoundTripAndRefusals) {
  layers::ModelConfig m = small_model(2);
  layers::GPT a(m, 1, 8);
  layers::init_parameters(a.params(), a.table(), 9);
  const std::string path = std::filesystem::temp_directory_path() /
                           ("gridlm_weights_" + std::to_string(::getpid()) + ".h5");
  {
    io::H5File f = io::H5File::create(path);
    for (const layers::ParamInfo& p : a.table().params) {
      f.write(p.name, p.shape, layers::gather_parameter(p, a.params(), nullptr).data());
    }
    engine::write_model_attributes(f, m);
    f.commit();
  }
  io::H5File f = io::H5File::open_read(path);
  const layers::ModelConfig back = engine::read_model_attributes(f);
  EXPECT_EQ(back.vocab_size, 37);
  EXPECT_EQ(back.n_layer, 2);
  EXPECT_TRUE(back.tied_embeddings);
  layers::GPT b(back, 1, 8);
  engine::load_weights(b, f);
  const std::vector<float> wrote = test::to_host(a.params()), read = test::to_host(b.params());
  ASSERT_EQ(read.size(), a.table().total);
  for (std::size_t i = 0; i < read.size(); ++i) {
    ASSERT_EQ(wrote[i], read[i]) << "element " << i;
  }
  m.d_model = 32;
  layers::GPT wider(m, 1, 8);
  try {
    engine::load_weights(wider, f);
    ADD_FAILURE() << "a file for another model loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the file was written for another model"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Sampler, OnlyDrawableIdsAreDrawn) {
  const std::vector<float> logits{0.0f, 0.5f, 10.0f, 9.0f}; // 2 and 3: padding rows
  engine::SampleOptions o;
  o.drawable = 2;
  o.temperature = 0.0;
  EXPECT_EQ(engine::pick_token(logits, o, 0.5), 1);
  o.temperature = 1.0;
  o.top_k = 0;
  for (double u : {0.0, 0.3, 0.7, 0.999999})
    EXPECT_LT(engine::pick_token(logits, o, u), 2) << u;
}

// Greedy generation is deterministic: with a stop id it is the same tokens, cut after the stop
// id's first draw. Weights gone NaN are an error, not a stream of id 0.
TEST(Sampler, GenerationStopsAtTheStopIdAndRefusesNonFiniteLogits) {
  layers::GPT gpt(small_model(1), 1, 8);
  layers::init_parameters(gpt.params(), gpt.table(), 3);
  engine::SampleOptions o;
  o.tokens = 30;
  o.temperature = 1.0;
  o.top_k = 0;
  o.drawable = 5;
  for (std::int32_t id : engine::generate(gpt, {1, 2}, o))
    EXPECT_LT(id, 5);
  o.drawable = 0;
  const std::vector<std::int32_t> all = engine::generate(gpt, {1, 2}, o);
  ASSERT_EQ(all.size(), 30u);
  o.stop_id = all[10];
  const std::size_t first = std::size_t(std::find(all.begin(), all.end(), all[10]) - all.begin());
  const std::vector<std::int32_t> cut = engine::generate(gpt, {1, 2}, o);
  EXPECT_EQ(cut, std::vector<std::int32_t>(all.begin(), all.begin() + std::ptrdiff_t(first) + 1));

  auto host = Kokkos::create_mirror_view(gpt.params());
  Kokkos::deep_copy(host, gpt.params());
  host(gpt.table().params[std::size_t(gpt.table().lnf_w)].offset) = std::nanf("");
  Kokkos::deep_copy(gpt.params(), host);
  try {
    engine::generate(gpt, {1, 2}, o);
    ADD_FAILURE() << "NaN weights sampled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("logits for token 1 are not finite"), std::string::npos)
        << e.what();
  }
}

// The sampler's head of one row gives the logits that the whole forward gives at that row (the
// head over every row and a loss against dummy targets were most of a token's time), in fp32
// and bf16, at every position of the window.
TEST(Sampler, TheLogitsOfOneRowAreTheForwardsRow) {
  for (const layers::Precision precision : {layers::Precision::fp32, layers::Precision::bf16}) {
    const layers::ModelConfig m = small_model(1);
    const int T = 8, V = m.vocab_size;
    layers::GPT gpt(m, 1, T, layers::StageSpec{}, nullptr, 1, layers::Backward::fused, precision);
    layers::init_parameters(gpt.params(), gpt.table(), 5);
    const std::vector<std::int32_t> tokens{3, 1, 4, 1, 5, 9, 2, 6}, targets(8, 0);
    std::vector<float> all(std::size_t(T) * std::size_t(V));
    std::vector<float> row(static_cast<std::size_t>(V));
    gpt.forward(tokens.data(), targets.data(), 1, T, all.data());
    for (int p = 0; p < T; ++p) {
      gpt.next_token_logits(tokens.data(), p, row.data());
      for (int v = 0; v < V; ++v) {
        const float want = all[std::size_t(p) * std::size_t(V) + std::size_t(v)];
        ASSERT_NEAR(row[std::size_t(v)], want, 1e-5f * (1.0f + std::fabs(want)))
            << "position " << p << ", id " << v;
      }
    }
    EXPECT_THROW(gpt.next_token_logits(tokens.data(), T, row.data()), Error);
  }
}
