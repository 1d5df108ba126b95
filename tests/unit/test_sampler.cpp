// Sampling and weights files: the draw honours temperature and top-k; a weights file written
// from a model loads back bit for bit (and into the command line's Generator, which draws what
// the model draws), and a file for another model is refused by name.
#include <gtest/gtest.h>

#include <unistd.h>

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

TEST(WeightsFile, RoundTripAndRefusals) {
  layers::ModelConfig m;
  m.vocab_size = 37; // padded to 40 rows in memory; the file holds 37
  m.seq_len = 8;
  m.n_layer = 2;
  m.n_head = 2;
  m.d_model = 16;
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
  // The command line's Generator loads the same file and draws what the model itself draws.
  engine::SampleOptions o;
  o.tokens = 12;
  o.seed = 5;
  engine::Generator generator(back, f);
  const std::vector<std::int32_t> prompt{3, 1, 4};
  const std::vector<std::int32_t> drawn = engine::generate(b, prompt, o);
  EXPECT_EQ(generator.generate(prompt, o), drawn);
  o.seed = 6;
  EXPECT_EQ(generator.generate(prompt, o), engine::generate(b, prompt, o));
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
