// Stage layouts: uniform, balanced (the head over a large vocabulary weighs several blocks) and
// explicit counts; every block assigned exactly once, and clear errors otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "layers/model_config.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/stage_layout.hpp"

// The layouts of a model, through the model's cost estimate.
std::vector<int> plan_stage_blocks(const gridlm::layers::ModelConfig& m, int Q,
                                   const std::string& layout) {
  return gridlm::parallel::plan_stage_blocks(gridlm::layers::stage_cost_model(m), Q, layout);
}
std::vector<double> stage_costs(const gridlm::layers::ModelConfig& m, const std::vector<int>& b) {
  return gridlm::parallel::stage_costs(gridlm::layers::stage_cost_model(m), b);
}

namespace {

gridlm::layers::ModelConfig model(int layers, int vocab) {
  gridlm::layers::ModelConfig m;
  m.n_layer = layers;
  m.vocab_size = vocab;
  m.d_model = 128;
  m.seq_len = 128;
  return m;
}

std::string error_of(const gridlm::layers::ModelConfig& m, int Q, const std::string& layout) {
  try {
    plan_stage_blocks(m, Q, layout);
  } catch (const gridlm::Error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(StageLayout, UniformSplitsEvenly) {
  EXPECT_EQ(plan_stage_blocks(model(8, 512), 4, "uniform"), (std::vector<int>{2, 2, 2, 2}));
  const std::string msg = error_of(model(7, 512), 2, "uniform");
  EXPECT_NE(msg.find("does not divide"), std::string::npos) << msg;
  EXPECT_NE(msg.find("balanced"), std::string::npos) << "names the way out: " << msg;
  // Too few blocks for any layout: uniform's own message, without a balanced layout to offer.
  const std::string few = error_of(model(4, 512), 8, "uniform");
  EXPECT_NE(few.find("'uniform'"), std::string::npos) << few;
  EXPECT_EQ(few.find("'balanced'"), std::string::npos) << few;
}

TEST(StageLayout, BalancedGivesTheHeadStageFewerBlocks) {
  // A 32000-token head costs about 32000 / (12 x 128 + 128) = 19 blocks of width 128.
  const auto m = model(24, 32000);
  const std::vector<int> b = plan_stage_blocks(m, 4, "balanced");
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), 0), 24);
  EXPECT_LT(b.back(), b.front());
  // It is the best contiguous split: no stage costs more than uniform's costliest.
  const auto balanced = stage_costs(m, b);
  const auto uniform = stage_costs(m, {6, 6, 6, 6});
  EXPECT_LT(*std::max_element(balanced.begin(), balanced.end()),
            *std::max_element(uniform.begin(), uniform.end()));
  // With a tiny vocabulary it is uniform again.
  EXPECT_EQ(plan_stage_blocks(model(8, 16), 4, "balanced"), (std::vector<int>{2, 2, 2, 2}));
}

TEST(StageLayout, ExplicitCountsAreCheckedBlockForBlock) {
  EXPECT_EQ(plan_stage_blocks(model(8, 512), 3, "3, 3,2"), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(plan_stage_blocks(model(8, 512), 3, "0,4,4"), (std::vector<int>{0, 4, 4}))
      << "the first stage may hold only the embedding";
  std::string msg = error_of(model(8, 512), 3, "3,3,3");
  EXPECT_NE(msg.find("assigns 9 blocks but the model has model.n_layer = 8"), std::string::npos)
      << msg;
  msg = error_of(model(8, 512), 3, "4,4");
  EXPECT_NE(msg.find("names 2 stages"), std::string::npos) << msg;
  msg = error_of(model(8, 512), 3, "4,0,4");
  EXPECT_NE(msg.find("needs at least one"), std::string::npos) << msg;
  msg = error_of(model(8, 512), 3, "4,x,4");
  EXPECT_NE(msg.find("'x' is not a block count"), std::string::npos) << msg;
  msg = error_of(model(8, 512), 3, "3,3,2,");
  EXPECT_NE(msg.find("'' is not a block count"), std::string::npos) << msg;
  msg = error_of(model(8, 512), 3, "3,,3,2");
  EXPECT_NE(msg.find("'' is not a block count"), std::string::npos) << msg;
  msg = error_of(model(8, 512), 2, "4,-1");
  EXPECT_FALSE(msg.empty());
}
