// The GPT's contracts beyond its numerics: the parameter table, initialisation that depends only
// on (seed, parameter name), and activations planned for one micro-batch shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "layers/adamw.hpp"
#include "layers/encoder.hpp"
#include "layers/gpt.hpp"
#include "parallel/diagnostics.hpp"
#include "tests/device_buffer.hpp"

using namespace gridlm::layers;

namespace {

ModelConfig small() {
  ModelConfig m;
  m.vocab_size = 17;
  m.seq_len = 8;
  m.n_layer = 2;
  m.n_head = 2;
  m.d_model = 8;
  return m;
}

std::vector<float> values(const GPT& g, const std::string& name) {
  const int i = g.table().find(name);
  return g.host_param(i);
}

} // namespace

TEST(ParamTable, NamesShapesSplitsAndOwners) {
  ModelConfig m = small();
  const ParamTable t = make_param_table(m);
  const ParamInfo& qkv = t.params[t.find("h.1.attn.c_attn.weight")];
  EXPECT_EQ(qkv.shape, (std::vector<std::int64_t>{24, 8}));
  EXPECT_EQ(qkv.split, TpSplit::rows);
  EXPECT_EQ(qkv.block, 1);
  EXPECT_EQ(t.params[t.find("h.0.mlp.c_proj.weight")].split, TpSplit::cols);
  EXPECT_EQ(t.params[t.find("ln_f.weight")].block, -1);
  EXPECT_EQ(t.lm_head, t.wte) << "tied by default";
  EXPECT_EQ(t.find("lm_head.weight"), -1);
  // Parameters tile the flat buffer exactly, in order.
  std::size_t next = 0;
  for (const ParamInfo& p : t.params) {
    EXPECT_EQ(p.offset, next) << p.name;
    next += p.size;
  }
  EXPECT_EQ(next, t.total);
  m.tied_embeddings = false;
  EXPECT_NE(make_param_table(m).find("lm_head.weight"), -1);
}

TEST(Init, SameSeedSameBitsOtherSeedOtherValues) {
  GPT a(small(), 2, 8), b(small(), 2, 8), c(small(), 2, 8);
  init_parameters(a.params(), a.table(), 5);
  init_parameters(b.params(), b.table(), 5);
  init_parameters(c.params(), c.table(), 6);
  for (const ParamInfo& p : a.table().params) {
    EXPECT_EQ(values(a, p.name), values(b, p.name)) << p.name;
    if (p.init_std > 0) {
      EXPECT_NE(values(a, p.name), values(c, p.name)) << p.name;
    }
  }
  EXPECT_EQ(values(a, "h.0.ln_1.weight"), std::vector<float>(8, 1.0f));
  EXPECT_EQ(values(a, "h.0.attn.c_attn.bias"), std::vector<float>(24, 0.0f));
}

TEST(Init, ValuesDependOnTheNameNotOnTheOtherTensors) {
  // The untied model has one more tensor (lm_head), shifting every later offset; shared names
  // must still get identical values.
  ModelConfig untied = small();
  untied.tied_embeddings = false;
  GPT a(small(), 1, 8), b(untied, 1, 8);
  init_parameters(a.params(), a.table(), 9);
  init_parameters(b.params(), b.table(), 9);
  for (const ParamInfo& p : a.table().params)
    EXPECT_EQ(values(a, p.name), values(b, p.name));
}

TEST(Init, StandardDeviationsFollowGpt2) {
  ModelConfig m = small();
  m.d_model = 64;
  m.n_head = 4;
  m.n_layer = 8;
  GPT g(m, 1, 8);
  init_parameters(g.params(), g.table(), 1);
  auto stddev = [&](const std::string& name) {
    const std::vector<float> v = values(g, name);
    double s = 0.0;
    for (float x : v)
      s += double(x) * x;
    return std::sqrt(s / double(v.size()));
  };
  EXPECT_NEAR(stddev("h.0.mlp.c_fc.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("h.0.mlp.c_proj.weight"), 0.02 / std::sqrt(16.0), 0.0005);
}

TEST(Activations, OtherShapesAreRefused) {
  GPT g(small(), 2, 8);
  init_parameters(g.params(), g.table(), 1);
  std::vector<std::int32_t> tok(3 * 8, 1);
  EXPECT_THROW(g.forward(tok.data(), tok.data(), 3, 8), gridlm::Error);
  EXPECT_THROW(g.forward(tok.data(), tok.data(), 2, 4), gridlm::Error);
  EXPECT_NO_THROW(g.forward(tok.data(), tok.data(), 2, 8));
  EXPECT_THROW(GPT(small(), 2, 9), gridlm::Error) << "longer than the context";
  tok[3] = 17; // outside the vocabulary
  EXPECT_THROW(g.forward(tok.data(), tok.data(), 2, 8), gridlm::Error);
}

// A pipeline's boundary tensors come from a pool: a dropped buffer is the next one taken, held
// ones are distinct, and a handle that outlives its model stays valid.
TEST(BoundaryBuffers, DroppedOnesAreReusedHeldOnesAreDistinct) {
  std::shared_ptr<float> kept;
  std::size_t n = 0;
  {
    GPT g(small(), 2, 8);
    n = g.boundary_size();
    EXPECT_EQ(g.boundary_pool().floats(), n);
    float* first = g.boundary_buffer().get();
    EXPECT_EQ(g.boundary_buffer().get(), first) << "a dropped buffer is reused";
    const auto a = g.boundary_buffer(), b = g.boundary_buffer();
    EXPECT_NE(a.get(), b.get());
    EXPECT_EQ(g.boundary_pool().made(), 2u);
    EXPECT_EQ(g.boundary_pool().taken(), 4u);
    kept = g.boundary_buffer();
  }
  // Still allocated (the sanitizer build would report a write to freed memory).
  const Kokkos::View<float*, Kokkos::MemoryTraits<Kokkos::Unmanaged>> view(kept.get(), n);
  Kokkos::deep_copy(view, 1.0f);
  kept.reset();
}

// The chains that let a GPU give each token its own threads in the embedding's backward: every
// position is on its token's chain once, in order, starting at the token's first position.
TEST(Embedding, SameTokenLinksChainEachTokensPositionsInOrder) {
  const std::vector<std::int32_t> tokens{5, 2, 5, 7, 2, 5, 9};
  const long N = long(tokens.size());
  std::vector<std::int32_t> links(2 * tokens.size(), 99);
  same_token_links(links.data(), tokens.data(), N, 10);
  EXPECT_EQ(std::vector<std::int32_t>(links.begin(), links.begin() + N),
            (std::vector<std::int32_t>{2, 4, 5, -1, -1, -1, -1}));
  EXPECT_EQ(std::vector<std::int32_t>(links.begin() + N, links.end()),
            (std::vector<std::int32_t>{1, 1, 0, 1, 0, 0, 1}));
}

// The backward with the chains (a thread per token and column on a GPU) gives the bits of the
// one without (a thread per column walking every position), repeated tokens, a vocabulary slice
// and accumulation into existing gradients included; and both the bits of a plain loop adding
// each position's gradient in order. On a CPU both are the CPU's loop (the plain loop is what
// checks it); the GPU check runs it where they differ.
TEST(Embedding, TokenBackwardWithChainsGivesTheSameBits) {
  const int B = 3, T = 50, C = 40;
  const long N = long(B) * T, vocab_begin = 4, vocab_local = 12;
  std::vector<std::int32_t> tokens(N);
  for (long i = 0; i < N; ++i)
    tokens[i] = std::int32_t((i * i * 7 + 3) % 19); // repeats; some outside [4, 16)
  std::vector<std::int32_t> host_links(2 * N);
  same_token_links(host_links.data(), tokens.data(), N, 19);
  std::vector<float> start(vocab_local * C), dout(N * C);
  for (std::size_t i = 0; i < start.size(); ++i)
    start[i] = std::sin(0.3f * float(i));
  for (std::size_t i = 0; i < dout.size(); ++i)
    dout[i] = std::cos(0.7f * float(i)) * 1e-3f * float(i % 97);
  const gridlm::test::DeviceBuffer<std::int32_t> ids(tokens), links(host_links);
  const gridlm::test::DeviceBuffer<float> d(dout);
  gridlm::test::DeviceBuffer<float> walked(start), chained(start);
  token_embedding_backward(walked.data(), d.data(), ids.data(), B, T, C, vocab_begin, vocab_local);
  token_embedding_backward(chained.data(), d.data(), ids.data(), B, T, C, vocab_begin, vocab_local,
                           links.data());
  std::vector<float> in_order = start;
  for (long n = 0; n < N; ++n) {
    const long row = tokens[std::size_t(n)] - vocab_begin;
    if (row < 0 || row >= vocab_local) continue;
    for (int c = 0; c < C; ++c)
      in_order[std::size_t(row * C + c)] += dout[std::size_t(n * C + c)];
  }
  EXPECT_EQ(chained.download(), walked.download());
  EXPECT_EQ(walked.host, in_order);
  EXPECT_NE(walked.host, start) << "the gradient reached the table";
}

// The gradient norm's sum of squares over ranges in one launch (a GPU's way) against double
// sums of the same elements: ranges of uneven length, one of a single element.
TEST(GradNorm, RangesInOneLaunchSumAsDoublesDo) {
  std::vector<float> values(5000);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(0.01f * float(i)) * float(1 + i % 7);
  const std::vector<long> ranges{0, 1024, 1024, 1500, 2000, 2001, 3000, 5000};
  double want = 0.0;
  for (std::size_t r = 0; r < ranges.size(); r += 2) {
    for (long i = ranges[r]; i < ranges[r + 1]; ++i)
      want += double(values[std::size_t(i)]) * values[std::size_t(i)];
  }
  const gridlm::test::DeviceBuffer<float> data(values);
  const gridlm::test::DeviceBuffer<long> bounds(ranges);
  EXPECT_NEAR(sum_of_squares(data.data(), bounds.view()), want, 1e-6 * want);
}

// A model's share of the squared gradient norm is the sum over the tensors that count in it,
// whichever way the build computes it (per tensor on a CPU, all tensors in one launch on a GPU).
TEST(GradNorm, ModelSumsTheTensorsThatCount) {
  GPT g(small(), 2, 8);
  init_parameters(g.params(), g.table(), 3);
  std::vector<std::int32_t> x(16), y(16);
  for (int i = 0; i < 16; ++i)
    x[i] = (i * 7 + 3) % 17, y[i] = (i * 5 + 1) % 17;
  g.zero_grad();
  g.forward(x.data(), y.data(), 2, 8);
  g.backward(1.0f);
  double want = 0.0;
  for (std::size_t i = 0; i < g.table().params.size(); ++i) {
    if (!g.counts_in_norm(int(i))) continue;
    for (float v : g.host_grad(int(i)))
      want += double(v) * v;
  }
  ASSERT_GT(want, 0.0);
  EXPECT_NEAR(g.grad_sum_of_squares(), want, 1e-6 * want);
  // A whole model on one rank holds each tensor once: every tensor counts, whatever
  // counts_in_norm says (a tensor it dropped would not show above).
  double every = 0.0;
  for (std::size_t i = 0; i < g.table().params.size(); ++i) {
    for (float v : g.host_grad(int(i)))
      every += double(v) * v;
  }
  EXPECT_NEAR(g.grad_sum_of_squares(), every, 1e-6 * every);
}

TEST(Schedule, WarmupThenCosineToTheFloor) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = 4;
  c.decay_steps = 14;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate(c, 3), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 4), 1.0);
  EXPECT_NEAR(learning_rate(c, 9), 0.55, 1e-12); // half way: (1 + 0.1) / 2
  EXPECT_DOUBLE_EQ(learning_rate(c, 14), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 100), 0.1);
}

// A warmup that ends past the decay's end leaves no cosine decay: the start-up report says so,
// with how far the rate gets within the run, as learning_rate gives it; a warmup ending at or
// before the decay's end is not mentioned.
TEST(Schedule, AWarmupPastTheDecaysEndIsNoted) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = 10;
  c.decay_steps = 10;
  EXPECT_EQ(schedule_note(c, 10), "");
  c.decay_steps = 5; // the run's end: the warmup reaches half of lr
  std::string note = schedule_note(c, 5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 4), 0.5);
  EXPECT_NE(note.find("rises to 0.5 of train.lr by step 5;"), std::string::npos) << note;
  EXPECT_NE(note.find("below 5"), std::string::npos) << note;
  // An earlier decay end in a longer run: the warmup reaches lr, then min_lr.
  note = schedule_note(c, 24);
  EXPECT_DOUBLE_EQ(learning_rate(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 10), 0.1);
  EXPECT_NE(note.find("rises to 1 of train.lr by step 10, then drops to train.min_lr"),
            std::string::npos)
      << note;
}

TEST(Schedule, DecayHorizonZeroMeansTheRunsLastStepOnceResolved) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = 4;
  EXPECT_EQ(resolve_decay(c, 14).decay_steps, 14);
  c.decay_steps = 9;
  EXPECT_EQ(resolve_decay(c, 14).decay_steps, 9) << "an explicit horizon is kept";
  c.decay_steps = 0;
  // Unresolved, the schedule refuses instead of silently dropping to min_lr after the warmup.
  try {
    learning_rate(c, 5);
    ADD_FAILURE() << "an unresolved decay_steps = 0 was accepted";
  } catch (const gridlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.decay_steps = 0"), std::string::npos) << e.what();
  }
  EXPECT_NEAR(learning_rate(resolve_decay(c, 14), 9), 0.55, 1e-12);
}

namespace {

// Runs `stages` as a pipeline (forward in order, backward in reverse) and checks the loss and
// every gradient against the whole model, by name; copies of a tied wte are summed, as the
// pipeline's first and last stages will do.
void expect_stages_match_whole_model(const ModelConfig& m, const std::vector<StageSpec>& stages) {
  const int B = 2, T = 8;
  std::vector<std::int32_t> x(B * T), y(B * T);
  for (int i = 0; i < B * T; ++i) {
    x[i] = (i * 7 + 3) % m.vocab_size;
    y[i] = (i * 5 + 1) % m.vocab_size;
  }
  GPT whole(m, B, T);
  init_parameters(whole.params(), whole.table(), 11);
  whole.zero_grad();
  const double loss = whole.forward(x.data(), y.data(), B, T);
  whole.backward(1.0f);

  std::vector<std::unique_ptr<GPT>> parts;
  double stage_loss = 0.0;
  const float* carry = nullptr;
  for (const StageSpec& s : stages) {
    parts.push_back(std::make_unique<GPT>(m, B, T, s));
    GPT& g = *parts.back();
    init_parameters(g.params(), g.table(), 11);
    g.zero_grad();
    stage_loss = g.forward_stage(x.data(), carry, y.data(), B, T);
    carry = g.output();
  }
  const float* dcarry = nullptr;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    (*it)->backward(1.0f, dcarry);
    dcarry = (*it)->input_grad();
  }
  EXPECT_EQ(stage_loss, loss);
  for (const ParamInfo& p : whole.table().params) {
    std::vector<float> sum(p.size, 0.0f);
    int holders = 0;
    for (const auto& g : parts) {
      const int i = g->table().find(p.name);
      if (i < 0) continue;
      ++holders;
      EXPECT_EQ(values(*g, p.name), values(whole, p.name)) << "initialised alike: " << p.name;
      const std::vector<float> grad = g->host_grad(i);
      for (std::size_t j = 0; j < p.size; ++j)
        sum[j] += grad[j];
    }
    EXPECT_GE(holders, 1) << p.name << " is held by no stage";
    const std::vector<float> ref = whole.host_grad(whole.table().find(p.name));
    float worst = 0.0f, scale = 0.0f;
    for (std::size_t j = 0; j < p.size; ++j) {
      worst = std::max(worst, std::fabs(sum[j] - ref[j]));
      scale = std::max(scale, std::fabs(ref[j]));
    }
    EXPECT_LE(worst, 1e-6f * scale) << p.name;
  }
}

} // namespace

TEST(Stages, TwoStagesReproduceTheWholeModel) {
  ModelConfig m = small();
  m.n_layer = 3;
  expect_stages_match_whole_model(m, {{0, 1, true, false}, {1, 3, false, true}});
  m.tied_embeddings = false;
  expect_stages_match_whole_model(m, {{0, 2, true, false}, {2, 3, false, true}});
}

TEST(Stages, AStageMayHoldNoBlockOrAllOfThem) {
  ModelConfig m = small();
  m.n_layer = 2;
  expect_stages_match_whole_model(
      m, {{0, 0, true, false}, {0, 1, false, false}, {1, 2, false, false}, {2, 2, false, true}});
}

TEST(Stages, TablesHoldOnlyTheirPart) {
  ModelConfig m = small();
  m.n_layer = 4;
  const ParamTable middle = make_param_table(m, {1, 3, false, false});
  EXPECT_EQ(middle.find("wte.weight"), -1);
  EXPECT_EQ(middle.find("h.0.ln_1.weight"), -1);
  EXPECT_NE(middle.find("h.2.mlp.c_fc.weight"), -1);
  EXPECT_EQ(middle.params[middle.find("h.1.ln_1.weight")].block, 1);
  EXPECT_EQ(middle.find("ln_f.weight"), -1);
  const ParamTable last = make_param_table(m, {3, 4, false, true});
  EXPECT_NE(last.find("wte.weight"), -1) << "a tied head keeps its own copy of wte";
  EXPECT_EQ(last.find("wpe.weight"), -1);
  EXPECT_THROW(make_param_table(m, {3, 5, false, true}), gridlm::Error);
}

namespace {

// Two micro-batches through two activation slots, backward fused or split with the weight
// halves run late and in the other order (as zb-h1 does); the gradients must agree, in bf16 too
// (where both must round the same output gradients the same way).
void expect_split_backward_matches_fused(const ModelConfig& m, const StageSpec& stage,
                                         Precision precision = Precision::fp32) {
  const int B = 2, T = 8, C = m.d_model;
  std::vector<std::int32_t> x(B * T * 2), y(B * T * 2);
  // The previous stage's output and the next stage's input gradient, where a pipeline keeps
  // them: in the stage's memory. Tokens and targets come from the host.
  gridlm::test::DeviceBuffer<float> input(std::size_t(B) * T * C * 2), dout(input.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::int32_t((i * 7 + 3) % std::size_t(m.vocab_size));
    y[i] = std::int32_t((i * 5 + 1) % std::size_t(m.vocab_size));
  }
  for (std::size_t i = 0; i < input.size(); ++i) {
    input.host[i] = std::sin(0.37f * float(i));
    dout.host[i] = 0.01f * std::cos(0.11f * float(i));
  }
  input.upload();
  dout.upload();
  GPT fused(m, B, T, stage, nullptr, 2, Backward::fused, precision),
      split(m, B, T, stage, nullptr, 2, Backward::split, precision);
  std::vector<float> dinput[2][2]; // [model][micro-batch]
  for (GPT* g : {&fused, &split}) {
    init_parameters(g->params(), g->table(), 3);
    g->zero_grad();
    const int which = g == &split;
    for (int mb = 0; mb < 2; ++mb) {
      const std::size_t tok = std::size_t(mb) * B * T, act = tok * C;
      g->forward_stage(x.data() + tok, input.data() + act, y.data() + tok, B, T, nullptr, mb);
    }
    for (int mb = 0; mb < 2; ++mb) {
      const float* d = stage.head ? nullptr : dout.data() + std::size_t(mb) * B * T * C;
      if (which) {
        g->backward_input(0.5f, d, mb);
      } else {
        g->backward(0.5f, d, mb);
      }
      if (!stage.embedding) {
        dinput[which][mb] = gridlm::test::to_host(g->input_grad(), std::size_t(B) * T * C);
      }
    }
    if (which) {
      EXPECT_THROW(g->forward_stage(x.data(), input.data(), y.data(), B, T, nullptr, 1),
                   gridlm::Error)
          << "slot 1 still waits for its weight gradients";
      g->backward_weights(1);
      g->backward_weights(0);
      EXPECT_THROW(g->backward_weights(0), gridlm::Error) << "already done";
    }
  }
  for (int mb = 0; mb < 2; ++mb)
    EXPECT_EQ(dinput[0][mb], dinput[1][mb]) << "input gradients are computed the same way";
  for (const ParamInfo& p : fused.table().params) {
    const std::vector<float> a = fused.host_grad(fused.table().find(p.name));
    const std::vector<float> b = split.host_grad(split.table().find(p.name));
    float worst = 0.0f, scale = 1e-30f;
    for (std::size_t j = 0; j < p.size; ++j) {
      worst = std::max(worst, std::fabs(a[j] - b[j]));
      scale = std::max(scale, std::fabs(a[j]));
    }
    EXPECT_LE(worst, 1e-6f * scale) << p.name;
    EXPECT_GT(scale, 1e-12f) << p.name << " got a gradient";
  }
}

} // namespace

TEST(SplitBackward, InputThenWeightHalvesEqualTheFusedBackward) {
  ModelConfig m = small();
  m.n_layer = 2;
  expect_split_backward_matches_fused(m, {});
  expect_split_backward_matches_fused(m, {0, 1, true, false});
  expect_split_backward_matches_fused(m, {1, 2, false, true});
  m.tied_embeddings = false;
  expect_split_backward_matches_fused(m, {0, 2, false, false});
}

TEST(SplitBackward, HalvesEqualTheFusedBackwardInBf16) {
  ModelConfig m = small();
  expect_split_backward_matches_fused(m, {}, Precision::bf16);
  expect_split_backward_matches_fused(m, {1, 2, false, true}, Precision::bf16);
  m.tied_embeddings = false;
  expect_split_backward_matches_fused(m, {0, 2, false, false}, Precision::bf16);
}

TEST(SplitBackward, HalvesRefusedOutOfOrder) {
  GPT fused(small(), 2, 8);
  EXPECT_THROW(fused.backward_input(1.0f), gridlm::Error) << "not planned for a split backward";
  GPT split(small(), 2, 8, {}, nullptr, 1, Backward::split);
  EXPECT_THROW(split.backward_weights(0), gridlm::Error) << "no backward_input before";
}
