// The up-front memory estimate (engine/memory_budget.hpp) against what a model really allocates:
// at one rank exactly the model's buffers and AdamW's state (test_memory_estimate checks it
// against the start-up report in every layout), without overflow at absurd sizes, and the
// stage transfers the executor holds.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/memory_budget.hpp"
#include "engine/pipeline_model.hpp"
#include "layers/adamw.hpp"
#include "layers/gpt.hpp"
#include "parallel/schedule_transfers.hpp"

namespace gridlm::engine {
namespace {

struct Shape {
  int vocab, seq, layers, heads, width, batch;
};

TEST(MemoryBudget, EstimateBoundsWhatOneRankAllocates) {
  for (const std::string precision : {"fp32", "bf16"})
    for (const Shape s : {Shape{512, 32, 2, 2, 32, 4}, Shape{4096, 64, 4, 4, 128, 8},
                          Shape{256, 128, 6, 8, 256, 2}, Shape{32000, 16, 1, 2, 64, 1}}) {
      RunConfig c;
      c.model.vocab_size = s.vocab;
      c.model.seq_len = s.seq;
      c.model.n_layer = s.layers;
      c.model.n_head = s.heads;
      c.model.d_model = s.width;
      c.train.micro_batch = s.batch;
      c.train.precision = precision;
      const MemoryEstimate e = estimate_memory(c, parallel::Layout{1, 1, 1});
      const layers::GPT model(c.model, s.batch, s.seq, {}, nullptr, 1, layers::Backward::fused,
                              parse_precision(precision));
      const layers::MemoryReport m = model.memory();
      const layers::AdamW adamw(layers::OptimizerConfig{}, model.table());
      const double real = double(m.weights + m.gradients + adamw.state_bytes() + m.activations);
      SCOPED_TRACE(::testing::Message()
                   << precision << ", vocab " << s.vocab << " width " << s.width << ": estimate "
                   << e.total() << " B, allocated " << real);
      EXPECT_DOUBLE_EQ(e.total(), real);
      EXPECT_DOUBLE_EQ(e.weights, double(m.weights));
      EXPECT_DOUBLE_EQ(e.activations, double(m.activations));
    }
}

TEST(MemoryBudget, HugeSizesDoNotOverflowAndNameTheKey) {
  RunConfig c;
  c.model.vocab_size = 2000000000;
  const MemoryEstimate e = estimate_memory(c, parallel::Layout{1, 1, 1});
  EXPECT_GT(e.total(), 1e12);
  EXPECT_NE(e.largest.find("model.vocab_size = 2000000000"), std::string::npos) << e.largest;
  c.model.vocab_size = 512;
  c.train.micro_batch = 100000;
  EXPECT_NE(estimate_memory(c, parallel::Layout{1, 1, 1}).largest.find("train.micro_batch"),
            std::string::npos);
}

TEST(MemoryBudget, SplittingShrinksTheShare) {
  RunConfig c;
  const double whole = estimate_memory(c, parallel::Layout{1, 1, 1}).total();
  EXPECT_LT(estimate_memory(c, parallel::Layout{1, 1, 2}).total(), 0.6 * whole);
  EXPECT_LT(estimate_memory(c, parallel::Layout{1, 2, 1}).total(), whole);
  c.parallel.zero = 1;
  EXPECT_LT(estimate_memory(c, parallel::Layout{4, 1, 1}).optimizer,
            0.3 * estimate_memory(c, parallel::Layout{1, 1, 1}).optimizer);
}

// A pipeline stage's transfers: as many buffers as the executor holds at once for the schedule
// and its posting (parallel::held_boundary_buffers; that the executor holds no more is checked
// by the pipeline tests against the buffers it made), for training or validation.
TEST(MemoryBudget, StageTransfersCountWhatTheExecutorHolds) {
  RunConfig c;
  c.train.grad_accum = 8;
  const double boundary = 4.0 * c.train.micro_batch * c.model.seq_len * c.model.d_model;
  EXPECT_EQ(estimate_memory(c, parallel::Layout{2, 1, 1}).transfers, 0.0) << "no pipeline";
  const auto held = [](parallel::ScheduleKind kind, int p, int m, int v, bool grouped) {
    return parallel::held_boundary_buffers(parallel::make_schedule(kind, p, m, v), grouped);
  };
  // 1f1b at 4 stages: a middle stage holds every receive of the step (2 per micro-batch);
  // NCCL's groups hold a few. The largest stage is an end one: it also holds the tied
  // embedding's exchange, two host copies of the embedding's gradient.
  const double tied = 2 * 4.0 * c.model.vocab_size * c.model.d_model;
  const MemoryEstimate up_front = estimate_memory(c, parallel::Layout{1, 4, 1});
  EXPECT_DOUBLE_EQ(up_front.transfers,
                   held(parallel::ScheduleKind::one_f_one_b, 4, 8, 1, false) * boundary + tied);
  EXPECT_GE(up_front.transfers, 2 * 8 * boundary);
  const MemoryEstimate grouped = estimate_memory(c, parallel::Layout{1, 4, 1}, true);
  EXPECT_DOUBLE_EQ(grouped.transfers,
                   held(parallel::ScheduleKind::one_f_one_b, 4, 8, 1, true) * boundary + tied);
  EXPECT_LT(grouped.transfers - tied, (up_front.transfers - tied) / 2);
  EXPECT_DOUBLE_EQ(up_front.total(), up_front.weights + up_front.gradients + up_front.optimizer +
                                         up_front.activations + up_front.transfers);
  // Validation runs its global batches in forward-only steps of a few micro-batches: more of
  // them hold no more.
  c.train.eval_batches = 100;
  EXPECT_DOUBLE_EQ(estimate_memory(c, parallel::Layout{1, 4, 1}).transfers, up_front.transfers);
  // Chunks on one stage hand their tensors over in buffers too.
  c.parallel.schedule = "interleaved-1f1b";
  c.parallel.chunks = 2;
  EXPECT_GT(estimate_memory(c, parallel::Layout{1, 1, 1}).transfers, tied);
  // Many micro-batches of a small model: the transfers are what to lower, and the message says
  // how.
  c.parallel.schedule = "1f1b";
  c.parallel.chunks = 1;
  c.train.grad_accum = 4096;
  const std::string largest = estimate_memory(c, parallel::Layout{1, 2, 1}).largest;
  EXPECT_NE(largest.find("stage transfers"), std::string::npos) << largest;
  EXPECT_NE(largest.find("parallel.dp"), std::string::npos) << largest;
}

} // namespace
} // namespace gridlm::engine
