// The pipeline executor reproduces the single-rank model: for every schedule kind, pp = the
// world size (2 or 4; interleaved with 2 chunks per stage) gives the same loss and the same
// gradient for every parameter (compared on the rank that holds it, tied embedding copies
// included) as one rank accumulating the same micro-batches, after one step, and the same
// losses over 20 AdamW steps. Registered at 2 and 4 ranks.
//
// Tolerances (ref = one rank): step 1 loss |d| <= 1e-5 |ref|, gradients max|d| <= 1e-4 max|ref|
// + 1e-7 per tensor; losses over 20 steps |d| <= 1e-4 |ref|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "app/pipeline.hpp"
#include "layers/adamw.hpp"
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

void fill(int step, int micro, std::vector<std::int32_t>& seq, int V) {
  for (std::size_t i = 0; i < seq.size(); ++i) {
    seq[i] = std::int32_t((i * 7 + std::size_t(micro) * 13 + std::size_t(step) * 5) % V);
  }
}

void check(parallel::ScheduleKind kind, int chunks, bool tied) {
  const int n = test::world_size(), m = 8, B = 2, T = 12;
  layers::ModelConfig mc = model();
  mc.tied_embeddings = tied;
  parallel::GridOptions o;
  o.layout = {1, n, 1};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, o);
  const parallel::Schedule schedule = parallel::make_schedule(kind, n, m, chunks);
  app::Pipeline pipe(mc, B, T, grid, schedule, nullptr);
  GPT whole(mc, B, T);
  init_parameters(whole.params(), whole.table(), 5);
  std::vector<std::unique_ptr<AdamW>> opts;
  for (auto& g : pipe.chunks()) {
    init_parameters(g->params(), g->table(), 5);
    opts.push_back(std::make_unique<AdamW>(OptimizerConfig{}, g->table()));
  }
  AdamW whole_opt(OptimizerConfig{}, whole.table());
  OptimizerConfig oc;
  oc.total_steps = 20;

  std::vector<std::int32_t> seq(B * (T + 1)), x(B * T), y(B * T);
  for (int step = 0; step < 20; ++step) {
    for (auto& g : pipe.chunks())
      g->zero_grad();
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
      for (auto& g : pipe.chunks()) {
        for (const ParamInfo& p : g->table().params) {
          const float* got = g->grad(g->table().find(p.name));
          const float* want = whole.grad(whole.table().find(p.name));
          float worst = 0.0f, scale = 0.0f;
          for (std::size_t i = 0; i < p.size; ++i) {
            worst = std::max(worst, std::fabs(got[i] - want[i]));
            scale = std::max(scale, std::fabs(want[i]));
          }
          EXPECT_LE(worst, 1e-4f * scale + 1e-7f) << p.name;
        }
      }
      EXPECT_NEAR(pipe.grad_norm_squared(nullptr), whole.grad_sum_of_squares(),
                  1e-4 * whole.grad_sum_of_squares());
    }
    const double norm = std::sqrt(pipe.grad_norm_squared(nullptr));
    for (std::size_t c = 0; c < opts.size(); ++c) {
      opts[c]->update(pipe.chunks()[c]->params(), pipe.chunks()[c]->grads(), step,
                      learning_rate(oc, step), norm);
    }
    whole_opt.update(whole.params(), whole.grads(), step, learning_rate(oc, step),
                     std::sqrt(whole.grad_sum_of_squares()));
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

TEST(Pipeline, BlocksThatDoNotDivideAreRefused) {
  const int n = test::world_size();
  layers::ModelConfig mc = model();
  mc.n_layer = 3 * n + 1;
  parallel::GridOptions o;
  o.layout = {1, n, 1};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, o);
  const auto schedule = parallel::make_schedule(parallel::ScheduleKind::one_f_one_b, n, 4);
  const std::string msg =
      test::collective_error([&] { app::Pipeline(mc, 2, 12, grid, schedule, nullptr); });
  EXPECT_NE(msg.find("does not divide into parallel.pp x parallel.chunks"), std::string::npos)
      << msg;
}
