// Full layouts of data, pipeline and tensor parallelism, with the data-parallel gradients
// reduced in buckets during the backward, with and without ZeRO-1, reproduce one rank: the same
// per-step losses and gradient norms over 20 AdamW steps, the same step-1 gradients and the same
// final weights. At 4 ranks:
// dp 4, dp 2 x pp 2 (zb-h1, interleaved-1f1b with 2 chunks per stage), dp 2 x tp 2; at 8: dp 2 x pp
// 2 x tp 2 with zb-h1 and with interleaved-1f1b; an untied head with weight decay on every kind of
// parameter at dp 2 x tp 2 with ZeRO-1 and pp 2 x tp 2 interleaved (8 ranks: dp 2 x pp 2 x tp 2
// zb-h1 with ZeRO-1). Buckets of 512
// floats straddle tensors, and most of them start while the backward still runs. Bucketed and
// unbucketed reduction give identical bits at dp 2 over 8 steps (each element is the sum of two
// numbers either way).
//
// Tolerances (ref = one rank), fp32: losses |d| <= 1e-6 |ref| and gradient norms |d| <= 1e-5
// |ref| at every step; step-1 gradients (output.gradients: reduced over dp, gathered under ZeRO)
// max|d| <= 1e-5 max|ref| + 1e-7 per tensor; final weights max|d| <= 2e-4 per tensor. Measured
// (2026-12-07, every fp32 layout here at 4 and 8 ranks, with ZeRO or not): losses 1.5e-8, norms
// 6.0e-7, step-1 gradients 6.1e-7 of the tensor's largest element, weights 2.4e-5: fp32
// reordering. AdamW's first steps move each weight by about lr = 1e-2 whatever the gradient's
// size, so a gradient element near zero whose sign differed by rounding would move its weight
// the other way: the weights' bound has the widest margin (8x). Dropping weight decay from the
// tensor-split matrices alone moves the weights by 1.1e-3 and the norm by 2e-3, caught twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/trainer.hpp"
#include "io/h5_file.hpp"
#include "layers/parameters.hpp"
#include "parallel/grid.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

struct Layout {
  int dp = 1, pp = 1, tp = 1;
  std::string schedule = "1f1b";
  int chunks = 1;
  int zero = 0;
  std::string precision = "fp32";
  bool untied = false; // an untied head, and weight decay on every kind of parameter
};

// How close a layout must come to one rank: losses and gradient norms relative to one rank's at
// every step, step-1 gradients relative to the tensor's largest element (plus `grad_floor`
// absolute), final weights absolute. fp32 by default; bf16 in Layouts.MatchOneRankInBf16.
struct Tolerance {
  double loss = 1e-6, norm = 1e-5, grad = 1e-5, grad_floor = 1e-7, weights = 2e-4;
};

// Sequences per step: 4 micro-batches of 4 sequences, split over the replicas. `steps`: 20 for
// the comparisons with one rank; the bitwise comparisons of two layouts need fewer, and 8 ranks
// oversubscribing a small machine make each step dear.
engine::RunConfig config(const Layout& l, const std::string& dir, double bucket_mb,
                         int steps = 20) {
  engine::RunConfig c;
  c.model.vocab_size = 37;
  c.model.seq_len = 12;
  c.model.n_layer = 4;
  c.model.n_head = 2;
  c.model.d_model = 16;
  c.train.micro_batch = 4 / l.dp;
  c.train.grad_accum = 4;
  c.train.steps = steps;
  c.train.log_every = 100;
  c.train.optim.lr = 1e-2;
  c.train.optim.decay_steps = steps;
  c.parallel.schedule = l.schedule;
  c.parallel.chunks = l.chunks;
  c.parallel.grad_bucket_mb = bucket_mb;
  c.parallel.zero = l.zero;
  c.train.precision = l.precision;
  if (l.untied) {
    c.model.tied_embeddings = false;
    c.train.optim.weight_decay = 0.5;
    c.train.optim.decay_embeddings = true;
    c.train.optim.decay_norms_and_biases = true;
  }
  c.output.dir = dir;
  c.output.metrics = "";
  c.output.weights = "model.h5";
  c.output.gradients = "grads.h5";
  return c;
}

std::string describe(const Layout& l) {
  return "dp " + std::to_string(l.dp) + " x pp " + std::to_string(l.pp) + " x tp " +
         std::to_string(l.tp) + ", " + l.schedule + (l.zero ? ", ZeRO-1" : "") + ", " +
         l.precision + (l.untied ? ", untied, decay on all" : "");
}

// Trains `c` on every rank, laid out as `l`.
engine::TrainResult train_as(const Layout& l, const engine::RunConfig& c) {
  parallel::GridOptions o;
  o.layout = {l.dp, l.pp, l.tp};
  return engine::train(c, parallel::Grid::create(MPI_COMM_WORLD, o));
}

engine::TrainResult run(const Layout& l, const std::string& dir, double bucket_mb, int steps = 20) {
  return train_as(l, config(l, dir, bucket_mb, steps));
}

// Per tensor of two model or gradient files (rank 0 reads both): the largest difference of an
// element, and the largest element of `ref`. A file it cannot read fails the test here, on
// rank 0 alone, without leaving the other ranks waiting.
struct TensorDifference {
  std::string name;
  double worst = 0.0, ref_max = 0.0;
};
std::vector<TensorDifference> differences(const std::string& a, const std::string& ref,
                                          const layers::ModelConfig& m) try {
  io::H5File fa = io::H5File::open_read(a), fb = io::H5File::open_read(ref);
  std::vector<TensorDifference> out;
  for (const layers::ParamInfo& p : layers::make_param_table(m).params) {
    std::size_t n = 1;
    for (std::int64_t d : p.shape)
      n *= std::size_t(d);
    std::vector<float> x(n), y(n);
    fa.read(p.name, x.data(), x.size());
    fb.read(p.name, y.data(), y.size());
    TensorDifference t{p.name};
    for (std::size_t i = 0; i < x.size(); ++i) {
      t.worst = std::max(t.worst, double(std::fabs(x[i] - y[i])));
      t.ref_max = std::max(t.ref_max, double(std::fabs(y[i])));
    }
    out.push_back(t);
  }
  return out;
} catch (const std::exception& e) {
  ADD_FAILURE() << e.what();
  return {{"(unreadable)", HUGE_VAL, 0.0}};
}

double weight_difference(const std::string& a, const std::string& b, const layers::ModelConfig& m) {
  double worst = 0.0;
  for (const TensorDifference& t : differences(a, b, m))
    worst = std::max(worst, t.worst);
  return worst;
}

// The one-rank run every layout is compared with, trained on rank 0 into `dir` (the other ranks
// wait, and get an empty result); `l`'s model and optimizer, one rank's layout.
engine::TrainResult train_one_rank(const std::string& dir, const Layout& l = {}) {
  engine::TrainResult one;
  if (test::world_rank() == 0)
    one = engine::train(config(l, dir, 0.0), parallel::Grid::create(MPI_COMM_SELF, {}));
  MPI_Barrier(MPI_COMM_WORLD);
  return one;
}

// `one`, `one_dir`: train_one_rank's result and directory, the same for every layout.
void expect_matches_one_rank(const Layout& l, const engine::TrainResult& one,
                             const std::string& one_dir, const Tolerance& tol = {}) {
  test::SharedDir dir("layouts");
  const engine::TrainResult mine = run(l, dir.path + "/layout", 512.0 * 4 / (1 << 20));
  if (l.dp > 1) {
    EXPECT_GT(mine.dp_buckets, 2) << describe(l);
    EXPECT_GT(mine.dp_buckets_overlapped, 0) << describe(l) << ": no bucket overlapped";
  }
  if (test::world_rank() != 0) return;
  ASSERT_EQ(mine.losses.size(), one.losses.size());
  double loss_margin = 0.0, norm_margin = 0.0; // the largest relative differences
  for (std::size_t s = 0; s < one.losses.size(); ++s) {
    EXPECT_NEAR(mine.losses[s], one.losses[s], tol.loss * one.losses[s])
        << describe(l) << " step " << s;
    EXPECT_NEAR(mine.grad_norms[s], one.grad_norms[s], tol.norm * one.grad_norms[s])
        << describe(l) << " step " << s;
    loss_margin = std::max(loss_margin, std::fabs(mine.losses[s] / one.losses[s] - 1));
    norm_margin = std::max(norm_margin, std::fabs(mine.grad_norms[s] / one.grad_norms[s] - 1));
  }
  EXPECT_LT(one.losses.back(), one.losses.front());
  const layers::ModelConfig m = config(l, "", 0).model;
  const double weights = weight_difference(dir.path + "/layout/model.h5", one_dir + "/model.h5", m);
  EXPECT_LE(weights, tol.weights) << describe(l);
  double margin = 0.0; // the largest difference as a share of the tensor's largest element
  for (const TensorDifference& t :
       differences(dir.path + "/layout/grads.h5", one_dir + "/grads.h5", m)) {
    EXPECT_GT(t.ref_max, 0.0) << t.name << ": no gradient";
    EXPECT_LE(t.worst, tol.grad * t.ref_max + tol.grad_floor)
        << describe(l) << ": gradient of " << t.name;
    margin = std::max(margin, t.worst / t.ref_max);
  }
  std::printf("%s: largest differences from one rank: step-1 gradient %.2e of the tensor's "
              "largest element, loss %.2e and gradient norm %.2e relative, weights %.2e\n",
              describe(l).c_str(), margin, loss_margin, norm_margin, weights);
}

} // namespace

TEST(Layouts, MatchOneRank) {
  const int n = test::world_size();
  ASSERT_TRUE(n == 4 || n == 8) << "register at 4 or 8 ranks";
  test::SharedDir ref("one_rank");
  const std::string one_dir = ref.path + "/one";
  const engine::TrainResult one = train_one_rank(one_dir);
  const auto check = [&](const Layout& l) { expect_matches_one_rank(l, one, one_dir); };
  if (n == 4) {
    for (int zero : {0, 1}) {
      check({4, 1, 1, "1f1b", 1, zero});
      check({2, 2, 1, "zb-h1", 1, zero});
      check({2, 2, 1, "interleaved-1f1b", 2, zero});
      check({2, 1, 2, "1f1b", 1, zero});
    }
  } else {
    for (int zero : {0, 1}) {
      check({2, 2, 2, "zb-h1", 1, zero});
      check({2, 2, 2, "interleaved-1f1b", 2, zero});
    }
  }
}

// bf16 products (train.precision = bf16): a layout sums partial products in another order than
// one rank does (tensor parallelism, other GEMM shapes, gradients reduced over replicas), and
// the next product rounds the sum to bf16, so a difference in the last fp32 bit can become one
// of a bf16 ulp (2^-8 relative) where a value lies near a rounding boundary. Tolerances against
// one rank in bf16 (measured at 4 ranks, worst layout): losses 5e-4 relative (7.6e-5), gradient
// norms 1e-2 (1.9e-3), step-1 gradients 2e-4 of the tensor's largest element (1.9e-5: 30 times
// fp32's), final weights 0.12 absolute (0.057). The weights' bound is loose for a reason: AdamW
// moves a weight by up to lr = 1e-2 a step whatever its gradient's size, so an element whose
// small gradient changes sign moves the other way; over 20 steps that reaches a few lr.
TEST(Layouts, MatchOneRankInBf16) {
  const int n = test::world_size();
  ASSERT_TRUE(n == 4 || n == 8) << "register at 4 or 8 ranks";
  test::SharedDir ref("one_rank_bf16");
  const std::string one_dir = ref.path + "/one";
  Layout bf16;
  bf16.precision = "bf16";
  const engine::TrainResult one = train_one_rank(one_dir, bf16);
  const Tolerance tol{5e-4, 1e-2, 2e-4, 1e-7, 0.12};
  const auto check = [&](Layout l) {
    l.precision = "bf16";
    expect_matches_one_rank(l, one, one_dir, tol);
  };
  if (n == 4) {
    check({2, 1, 2, "1f1b", 1, 0});
    check({2, 2, 1, "zb-h1", 1, 1});
    check({1, 2, 2, "interleaved-1f1b", 2, 0});
  } else {
    check({2, 2, 2, "zb-h1", 1, 1});
  }
}

// An untied head (its own gradient, not summed with the embedding's) and weight decay on the
// embeddings, norms and biases too, whose masks follow each parameter's kind through every
// split and shard; the vocabulary (37) is padded at tp 2. The fp32 tolerances.
TEST(Layouts, UntiedHeadAndDecayOnEveryKindMatchOneRank) {
  const int n = test::world_size();
  ASSERT_TRUE(n == 4 || n == 8) << "register at 4 or 8 ranks";
  test::SharedDir ref("one_rank_untied");
  const std::string one_dir = ref.path + "/one";
  Layout untied;
  untied.untied = true;
  const engine::TrainResult one = train_one_rank(one_dir, untied);
  const auto check = [&](Layout l) {
    l.untied = true;
    expect_matches_one_rank(l, one, one_dir);
  };
  if (n == 4) {
    check({2, 1, 2, "1f1b", 1, 1});
    check({1, 2, 2, "interleaved-1f1b", 2, 0});
  } else {
    check({2, 2, 2, "zb-h1", 1, 1});
  }
}

TEST(Layouts, BucketsDuringTheBackwardGiveTheBitsOfOneAllReduce) {
  test::SharedDir dir("buckets");
  const Layout l{2, 2, test::world_size() / 4, "zb-h1"};
  const engine::TrainResult bucketed = run(l, dir.path + "/bucketed", 512.0 * 4 / (1 << 20), 8);
  const engine::TrainResult whole = run(l, dir.path + "/whole", 0.0, 8);
  EXPECT_EQ(whole.dp_buckets_overlapped, 0);
  EXPECT_GT(bucketed.dp_buckets_overlapped, 0);
  EXPECT_EQ(bucketed.losses, whole.losses);
  EXPECT_EQ(bucketed.grad_norms, whole.grad_norms);
  if (test::world_rank() == 0) {
    EXPECT_EQ(weight_difference(dir.path + "/bucketed/model.h5", dir.path + "/whole/model.h5",
                                config(l, "", 0).model),
              0.0);
  }
}

// ZeRO-1 against plain data parallelism at dp 2: the reduce-scattered gradient elements are the
// same sums of two numbers as the all-reduced ones, and AdamW is elementwise, so without
// clipping the step-1 gradients, the weights and losses are identical bits. The gradient norm is
// summed over other partial sums (the owned parts, then over the grid), so it differs in its last
// bits (|d| <= 1e-6 |norm|); with clipping on, that difference reaches the weights through the clip
// factor.
TEST(Layouts, ZeroGivesTheBitsOfPlainDataParallelism) {
  test::SharedDir dir("zero");
  Layout plain{2, 2, test::world_size() / 4, "zb-h1"};
  Layout zero = plain;
  zero.zero = 1;
  auto train = [&](const Layout& l, const std::string& out) {
    engine::RunConfig c = config(l, out, 512.0 * 4 / (1 << 20), 8);
    c.train.optim.grad_clip = 0.0;
    return train_as(l, c);
  };
  const engine::TrainResult a = train(plain, dir.path + "/plain");
  const engine::TrainResult b = train(zero, dir.path + "/zero");
  EXPECT_EQ(a.losses, b.losses);
  ASSERT_EQ(a.grad_norms.size(), b.grad_norms.size());
  for (std::size_t s = 0; s < a.grad_norms.size(); ++s)
    EXPECT_NEAR(a.grad_norms[s], b.grad_norms[s], 1e-6 * a.grad_norms[s]) << "step " << s;
  if (test::world_rank() == 0) {
    EXPECT_EQ(weight_difference(dir.path + "/plain/model.h5", dir.path + "/zero/model.h5",
                                config(plain, "", 0).model),
              0.0);
    EXPECT_EQ(weight_difference(dir.path + "/plain/grads.h5", dir.path + "/zero/grads.h5",
                                config(plain, "", 0).model),
              0.0);
  }
}

// parallel.backend = mpi-staged (MPI through host copies, what a GPU build picks when its MPI
// cannot read device memory) against plain MPI on dp 2 x pp 2 x tp 1 or 2: the same reductions
// on copies of the same bytes, so identical losses, gradient norms and weights. Here the copies
// are host to host; the test proves the staged path carries every tensor-parallel, data-parallel
// and pipeline transfer and completes each non-blocking one before its buffer is read.
TEST(Layouts, StagedMpiGivesTheBitsOfMpi) {
  test::SharedDir dir("staged");
  const Layout l{2, 2, test::world_size() / 4, "zb-h1", 1, 1};
  auto train = [&](const std::string& backend, const std::string& out) {
    engine::RunConfig c = config(l, out, 512.0 * 4 / (1 << 20), 4);
    c.parallel.backend = backend;
    return train_as(l, c);
  };
  const engine::TrainResult a = train("mpi", dir.path + "/mpi");
  const engine::TrainResult b = train("mpi-staged", dir.path + "/staged");
  EXPECT_GT(b.dp_buckets_overlapped, 0) << "buckets reduced during the backward, staged too";
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.grad_norms, b.grad_norms);
  if (test::world_rank() == 0) {
    EXPECT_EQ(weight_difference(dir.path + "/mpi/model.h5", dir.path + "/staged/model.h5",
                                config(l, "", 0).model),
              0.0);
  }
}
