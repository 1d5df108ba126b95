// Finite-difference gradient checks for every layer and for the whole GPT. Each check builds a
// scalar L = sum(out * R) with a fixed random R, gets the analytic gradient from the layer's
// backward with dout = R, and compares with central differences of L.
//
// Every element of every tensor is checked (the tensors are small): a sample with a stride
// lands on the same columns of every row, and a kernel wrong in the others passed.
//
// Tolerance: fp32 kernels and a step of 1e-2 (1e-3 where curvature is high: GELU, the loss, the
// whole model) give differences up to 7e-5 of the tensor's largest gradient for one layer and
// 1.4e-3 for the whole model (measured); we require
// max |numeric - analytic| <= rel * max |analytic| + 2e-7 / step per tensor, rel = 1e-3 for a
// layer and 5e-3 for the whole model (the second term is the rounding of an O(1) fp32 loss). A
// gradient 1.5% off in one column fails it.
//
// Gradient buffers start from random values, not zeros, and the check is of what the backward
// added to them: every backward accumulates (+=), and one that overwrote would drop the earlier
// micro-batches' gradients while passing a check from zeros.
//
// Every buffer a kernel reads or writes is device memory (tests/device_buffer.hpp), so the checks
// run unchanged on a GPU build.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "layers/attention.hpp"
#include "layers/crossentropy.hpp"
#include "layers/encoder.hpp"
#include "layers/gelu.hpp"
#include "layers/gpt.hpp"
#include "layers/layernorm.hpp"
#include "layers/linear.hpp"
#include "tests/device_buffer.hpp"

using namespace gridlm::layers;
using Vec = std::vector<float>;
using Buf = gridlm::test::DeviceBuffer<float>;
using Ids = gridlm::test::DeviceBuffer<std::int32_t>;

namespace {

Vec random_vec(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  Vec v(n);
  for (float& x : v)
    x = u(rng);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += double(a[i]) * double(b[i]);
  return s;
}

// Compares `analytic` with central differences of `loss` w.r.t. the host values `x`, at every
// index; `put` hands each perturbed `x` to where the loss reads it.
void expect_gradient(const char* what, Vec& x, const Vec& analytic,
                     const std::function<double()>& loss, const std::function<void()>& put,
                     float eps = 1e-2f, float rel = 1e-3f) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  float scale = 0.0f;
  for (float g : analytic)
    scale = std::max(scale, std::fabs(g));
  ASSERT_GT(scale, 0.0f) << what << ": analytic gradient is all zero";
  float worst = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + eps;
    put();
    const double up = loss();
    x[i] = keep - eps;
    put();
    const double down = loss();
    x[i] = keep;
    const float numeric = float((up - down) / (2.0 * eps));
    worst = std::max(worst, std::fabs(numeric - analytic[i]));
  }
  put();
  // Absolute floor: rounding of an O(1) fp32 loss, divided by 2 eps.
  const float floor = 2e-7f / eps;
  EXPECT_LE(worst, rel * scale + floor)
      << what << ": max |numeric - analytic| = " << worst << " against max |analytic| = " << scale;
}

// A gradient buffer in device memory holding random values before the backward adds to it.
class Grad {
public:
  Grad(std::size_t n, std::mt19937& rng) : buf_(random_vec(n, rng)), start_(buf_.host) {}
  float* data() const { return buf_.data(); }
  // What the backward added.
  Vec added() {
    Vec a = buf_.download();
    for (std::size_t i = 0; i < a.size(); ++i)
      a[i] -= start_[i];
    return a;
  }

private:
  Buf buf_;
  Vec start_;
};

// The same for a layer input or weight held in device memory (the kernels read x's device
// copy), against what the backward added to `analytic`.
void expect_gradient(const char* what, Buf& x, Grad& analytic, const std::function<double()>& loss,
                     float eps = 1e-2f) {
  expect_gradient(
      what, x.host, analytic.added(), loss, [&] { x.upload(); }, eps);
}

} // namespace

TEST(GradCheck, Encoder) {
  std::mt19937 rng(1);
  const int B = 2, T = 3, C = 5, V = 7;
  const Ids tok(std::vector<std::int32_t>{1, 3, 1, 6, 0, 3}); // repeats exercise the scatter-add
  Buf wte(random_vec(V * C, rng)), wpe(random_vec(T * C, rng)), R(random_vec(B * T * C, rng));
  Buf out(B * T * C);
  Grad dwte(V * C, rng), dwpe(T * C, rng);
  auto loss = [&] {
    encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out.download(), R.host);
  };
  encoder_backward(dwte.data(), dwpe.data(), R.data(), tok.data(), B, T, C);
  expect_gradient("encoder wte", wte, dwte, loss);
  expect_gradient("encoder wpe", wpe, dwpe, loss);
}

namespace {

void check_layernorm(long N, int C, unsigned seed) {
  std::mt19937 rng(seed);
  Buf x(random_vec(N * C, rng, 2.0f)), w(random_vec(C, rng)), b(random_vec(C, rng)),
      R(random_vec(N * C, rng));
  Buf out(N * C), mean(N), rstd(N);
  Grad dx(N * C, rng), dw(C, rng), db(C, rng);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(out.download(), R.host);
  };
  loss();
  layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  expect_gradient("layernorm input", x, dx, loss);
  expect_gradient("layernorm weight", w, dw, loss);
  expect_gradient("layernorm bias", b, db, loss);
}

void check_linear(long N, int C, int OC, unsigned seed) {
  std::mt19937 rng(seed);
  Buf x(random_vec(N * C, rng)), w(random_vec(OC * C, rng)), b(random_vec(OC, rng)),
      R(random_vec(N * OC, rng));
  Buf out(N * OC);
  Grad dx(N * C, rng), dw(OC * C, rng), db(OC, rng);
  auto loss = [&] {
    linear_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
    return dot(out.download(), R.host);
  };
  linear_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, OC);
  expect_gradient("linear input", x, dx, loss);
  expect_gradient("linear weight", w, dw, loss);
  expect_gradient("linear bias", b, db, loss);
}

} // namespace

TEST(GradCheck, LayerNorm) { check_layernorm(6, 10, 2); }

// OC > one column block of the bias reduction.
TEST(GradCheck, Linear) { check_linear(5, 7, 70, 3); }

// More rows than two of a GPU's row chunks (column_sum_rows) and columns than two of its column
// blocks, so that the two-pass column sums of the weight and bias gradients meet every case.
TEST(GradCheck, LayerNormAndLinearOverManyRowsAndColumns) {
  check_layernorm(70, 130, 12);
  check_linear(70, 3, 130, 13);
}

TEST(GradCheck, Gelu) {
  std::mt19937 rng(4);
  const long N = 50;
  Buf x(random_vec(N, rng, 3.0f)), R(random_vec(N, rng)), out(N);
  Grad dx(N, rng);
  auto loss = [&] {
    gelu_forward(out.data(), x.data(), N);
    return dot(out.download(), R.host);
  };
  gelu_backward(dx.data(), x.data(), R.data(), N);
  expect_gradient("gelu input", x, dx, loss, 1e-3f);
}

namespace {

// Gradient of attention at sequence length T, and causality: output at position 0 must not
// change when a later key changes, while the output at that key's position does.
void check_attention(int B, int T, int NH, int C, unsigned seed) {
  std::mt19937 rng(seed);
  const long N = long(B) * T;
  Buf qkv(random_vec(N * 3 * C, rng)), R(random_vec(N * C, rng)), out(N * C);
  Grad dqkv(N * 3 * C, rng);
  Buf q(N * C), k(N * C), v(N * C), att(B * NH * attention_scores_per_head(T)), yh(N * C),
      datt(attention_block * T), dq(N * C), dk(N * C), dv(N * C);
  AttentionSaved saved{q.data(), k.data(), v.data(), att.data()};
  AttentionScratch scratch{yh.data(), datt.data(), dq.data(), dk.data(), dv.data()};
  auto loss = [&] {
    attention_forward(out.data(), saved, scratch, qkv.data(), B, T, C, NH);
    return dot(out.download(), R.host);
  };
  loss();
  attention_backward(dqkv.data(), scratch, R.data(), saved, B, T, C, NH);
  expect_gradient("attention qkv", qkv, dqkv, loss);
  loss();
  const float first = out.host[0], last = out.host[std::size_t(T - 1) * C];
  qkv.host[(T - 1) * 3 * C + C] += 1.0f; // a key at the last position of batch 0
  qkv.upload();
  loss();
  EXPECT_EQ(out.host[0], first);
  EXPECT_NE(out.host[std::size_t(T - 1) * C], last) << "the last position sees its own key";
}

} // namespace

TEST(GradCheck, CausalSelfAttention) { check_attention(2, 5, 2, 8, 5); }

// Three causal row blocks, the last one partial: exercises the blocked score storage and the
// accumulation of key and value gradients across blocks.
TEST(GradCheck, CausalSelfAttentionAcrossBlocks) {
  ASSERT_GT(70, 2 * attention_block);
  check_attention(1, 70, 2, 8, 8);
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  std::mt19937 rng(6);
  const long N = 4;
  const int V = 11;
  Vec logits = random_vec(N * V, rng, 3.0f);
  const Ids targets(std::vector<std::int32_t>{0, 10, 3, 3});
  Buf work(N * V), losses(N), scratch(3 * N);
  const auto put = [&] {
    work.host = logits;
    work.upload();
  };
  auto loss = [&] {
    return crossentropy_forward(work.data(), losses.data(), scratch.data(), targets.data(), N, V);
  };
  put();
  loss();
  crossentropy_backward(work.data(), scratch.data(), targets.data(), 1.0f / float(N), N, V);
  const Vec analytic = work.download(); // the loss overwrites work in place
  expect_gradient("cross-entropy logits", logits, analytic, loss, put, 1e-3f);
}

// A slice whose last columns are padding (a vocabulary padded for tensor parallelism): they are
// in neither the loss nor its gradient, even for a target there (which GPT refuses before).
TEST(GradCheck, SoftmaxCrossEntropyPaddingColumns) {
  std::mt19937 rng(9);
  const long N = 4;
  const int V = 12, real = 9;
  Vec logits = random_vec(N * V, rng, 3.0f);
  const Ids targets(std::vector<std::int32_t>{0, 8, 10, 3});
  Buf work(N * V), losses(N), scratch(3 * N);
  const VocabSlice slice{0, V, real, nullptr};
  const auto put = [&] {
    work.host = logits;
    work.upload();
  };
  auto loss = [&] {
    return crossentropy_forward(work.data(), losses.data(), scratch.data(), targets.data(), N,
                                slice);
  };
  put();
  loss();
  crossentropy_backward(work.data(), scratch.data(), targets.data(), 1.0f / float(N), N, slice);
  const Vec analytic = work.download();
  for (long n = 0; n < N; ++n) {
    for (int j = real; j < V; ++j)
      EXPECT_EQ(analytic[std::size_t(n * V + j)], 0.0f) << "row " << n << ", padding column " << j;
  }
  expect_gradient("cross-entropy logits with padding", logits, analytic, loss, put, 1e-3f);
}

TEST(GradCheck, WholeModelEveryParameterTensor) {
  ModelConfig m;
  m.vocab_size = 13;
  m.seq_len = 6;
  m.n_layer = 2;
  m.n_head = 2;
  m.d_model = 8;
  m.init_std = 0.3; // larger weights give every tensor gradients well above fp32 rounding
  for (bool tied : {true, false}) {
    m.tied_embeddings = tied;
    const int B = 2, T = 5;
    GPT gpt(m, B, T);
    init_parameters(gpt.params(), gpt.table(), 42);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> tok(0, m.vocab_size - 1);
    std::vector<std::int32_t> x(B * T), y(B * T);
    for (auto& t : x)
      t = tok(rng);
    for (auto& t : y)
      t = tok(rng);
    gpt.zero_grad();
    gpt.forward(x.data(), y.data(), B, T);
    gpt.backward(1.0f);
    for (const ParamInfo& p : gpt.table().params) {
      const int index = gpt.table().find(p.name);
      Vec values = gpt.host_param(index);
      const Vec analytic = gpt.host_grad(index);
      // The model's memory may be a GPU's: the perturbed values go in by deep_copy.
      const auto live = Kokkos::subview(gpt.params(), std::make_pair(p.offset, p.offset + p.size));
      const auto put = [&] {
        Kokkos::deep_copy(
            live,
            Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                values.data(), values.size()));
      };
      auto loss = [&] { return gpt.forward(x.data(), y.data(), B, T); };
      expect_gradient(p.name.c_str(), values, analytic, loss, put, 1e-3f, 5e-3f);
    }
    // A second micro-batch (the same one) without zero_grad: every tensor's gradient doubles, as
    // accumulation over micro-batches needs.
    std::vector<Vec> once;
    for (std::size_t i = 0; i < gpt.table().params.size(); ++i)
      once.push_back(gpt.host_grad(int(i)));
    gpt.forward(x.data(), y.data(), B, T);
    gpt.backward(1.0f);
    for (std::size_t i = 0; i < once.size(); ++i) {
      const Vec twice = gpt.host_grad(int(i));
      float scale = 0.0f, worst = 0.0f;
      for (std::size_t k = 0; k < twice.size(); ++k) {
        scale = std::max(scale, std::fabs(once[i][k]));
        worst = std::max(worst, std::fabs(twice[k] - 2.0f * once[i][k]));
      }
      EXPECT_LE(worst, 1e-5f * scale) << gpt.table().params[i].name << " after two micro-batches";
    }
  }
}
