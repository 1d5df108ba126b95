// bf16 matrix products (train.precision = bf16): the rounding follows the bfloat16 format
// (nearest, ties to even; infinities and NaN kept; overflow to infinity), and a model whose
// products read bf16 operands follows the fp32 model within bf16's precision without being it.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "layers/gpt.hpp"
#include "layers/kernels.hpp"
#include "tests/device_buffer.hpp"

using namespace gridlm::layers;
using gridlm::test::DeviceBuffer;
using gridlm::test::to_host;

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

ModelConfig model() {
  ModelConfig m;
  m.vocab_size = 61;
  m.seq_len = 40; // two causal row blocks of attention
  m.n_layer = 2;
  m.n_head = 2;
  m.d_model = 32;
  return m;
}

struct Batch {
  Batch(int B, int T) : x(std::size_t(B) * T), y(x.size()) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = std::int32_t((i * 7 + 3) % 61);
      y[i] = std::int32_t((i * 13 + 5) % 61);
    }
  }
  std::vector<std::int32_t> x, y; // [B, T] tokens and targets
};

} // namespace

TEST(Bf16, RoundsToTheNearestTiesToEven) {
  const float ulp = std::ldexp(1.0f, -7); // of bf16's 7 stored mantissa bits, at 1
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + ulp), 1.0f + ulp) << "representable values stay";
  // Halfway cases go to the even neighbour: down from 1 + ulp/2, up from 1 + 3 ulp/2.
  EXPECT_EQ(round_to_bf16(1.0f + ulp / 2), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 3 * ulp / 2), 1.0f + 2 * ulp);
  EXPECT_EQ(round_to_bf16(-(1.0f + 3 * ulp / 2)), -(1.0f + 2 * ulp));
  // Just past halfway goes up, just short of it down.
  EXPECT_EQ(round_to_bf16(1.0f + ulp / 2 + std::ldexp(1.0f, -20)), 1.0f + ulp);
  EXPECT_EQ(round_to_bf16(1.0f + ulp / 2 - std::ldexp(1.0f, -20)), 1.0f);
  EXPECT_EQ(round_to_bf16(0.0f), 0.0f);
  EXPECT_EQ(bits_of(round_to_bf16(-0.0f)), bits_of(-0.0f));
  // The format's limits.
  EXPECT_EQ(round_to_bf16(INFINITY), INFINITY);
  EXPECT_EQ(round_to_bf16(-INFINITY), -INFINITY);
  EXPECT_EQ(round_to_bf16(FLT_MAX), INFINITY) << "past bf16's largest finite value";
  EXPECT_TRUE(std::isnan(round_to_bf16(NAN)));
  EXPECT_TRUE(std::isnan(round_to_bf16(from_bits(0x7f800001u))))
      << "a NaN whose payload is in the dropped bits must not become an infinity";
  EXPECT_TRUE(std::isnan(round_to_bf16(from_bits(0xffffffffu))));
}

TEST(Bf16, KeepsTheTopSixteenBitsWithinHalfAnUlp) {
  const long n = 4096;
  Kokkos::View<float*> x("x", n), copy("copy", n), in_place("in_place", n);
  auto hx = Kokkos::create_mirror_view(x);
  for (long i = 0; i < n; ++i)
    hx(i) = std::sin(0.731f * float(i)) * std::ldexp(1.0f, int(i % 61) - 30);
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(in_place, x);
  round_to_bf16(copy.data(), x.data(), n);
  round_to_bf16(in_place.data(), n);
  auto hc = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), copy);
  auto hi = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), in_place);
  for (long i = 0; i < n; ++i) {
    EXPECT_EQ(bits_of(hc(i)) & 0xffffu, 0u) << i;
    EXPECT_LE(std::fabs(hc(i) - hx(i)), std::ldexp(std::fabs(hx(i)), -8)) << i;
    EXPECT_EQ(hc(i), round_to_bf16(hx(i))) << "the kernel rounds as the scalar does, " << i;
    EXPECT_EQ(bits_of(hi(i)), bits_of(hc(i))) << i;
  }
}

// One micro-batch through the same weights in fp32 and in bf16. The loss agrees to 1e-4
// (measured: 1.2e-6; the operands' rounding errors, 2^-9 relative at most, mostly cancel in the
// sums); every tensor's gradient to 2% of its norm (measured: at most 0.66%); and neither is
// bitwise the fp32 result.
TEST(Bf16, ModelFollowsFp32WithoutBeingIt) {
  const ModelConfig m = model();
  const int B = 2, T = 40;
  const Batch batch(B, T);
  const auto& x = batch.x;
  const auto& y = batch.y;
  GPT fp32(m, B, T), bf16(m, B, T, {}, nullptr, 1, Backward::fused, Precision::bf16);
  EXPECT_EQ(bf16.precision(), Precision::bf16);
  double loss[2];
  for (GPT* g : {&fp32, &bf16}) {
    init_parameters(g->params(), g->table(), 11);
    g->zero_grad();
    loss[g == &bf16] = g->forward(x.data(), y.data(), B, T);
    g->backward(1.0f);
  }
  EXPECT_NEAR(loss[1], loss[0], 1e-4 * loss[0]);
  std::printf("loss: fp32 %.7f, bf16 %.7f\n", loss[0], loss[1]);
  EXPECT_NE(loss[1], loss[0]);
  double worst = 0.0;
  for (const ParamInfo& p : fp32.table().params) {
    const std::vector<float> a = fp32.host_grad(fp32.table().find(p.name));
    const std::vector<float> b = bf16.host_grad(bf16.table().find(p.name));
    double diff = 0.0, norm = 0.0;
    for (std::size_t j = 0; j < p.size; ++j) {
      diff += double(a[j] - b[j]) * (a[j] - b[j]);
      norm += double(a[j]) * a[j];
    }
    ASSERT_GT(norm, 0.0) << p.name;
    EXPECT_LE(std::sqrt(diff / norm), 0.02) << p.name;
    EXPECT_GT(diff, 0.0) << p.name << ": the same bits as fp32";
    worst = std::max(worst, std::sqrt(diff / norm));
  }
  std::printf("largest relative gradient difference, bf16 against fp32: %.2e\n", worst);
}

// Every product reads its weight in bf16: moving each element of every weight matrix by a
// quarter of a bf16 ulp (which rounds back to the same bf16 value) leaves the bf16 model's loss
// and gradients bit for bit, while it moves the fp32 model's. A product that read its weight
// in fp32 would see the change. Untied, so that the head's matrix is not also the embedding's,
// which a lookup reads in fp32.
TEST(Bf16, ProductsReadTheirWeightsInBf16) {
  ModelConfig m = model();
  m.tied_embeddings = false;
  const int B = 2, T = 40;
  const Batch batch(B, T);
  for (const Precision precision : {Precision::bf16, Precision::fp32}) {
    GPT g(m, B, T, {}, nullptr, 1, Backward::fused, precision);
    init_parameters(g.params(), g.table(), 5);
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.params());
    const auto run = [&] {
      Kokkos::deep_copy(g.params(), host);
      g.zero_grad();
      const double loss = g.forward(batch.x.data(), batch.y.data(), B, T);
      g.backward(1.0f);
      auto grads = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.grads());
      return std::make_pair(loss, std::vector<float>(grads.data(), grads.data() + grads.size()));
    };
    int matrices = 0;
    for (const ParamInfo& p : g.table().params) {
      if (p.kind != ParamKind::weight) continue;
      ++matrices;
      for (std::size_t j = p.offset; j < p.offset + p.size; ++j)
        host(j) = round_to_bf16(host(j));
    }
    ASSERT_EQ(matrices, 4 * m.n_layer + 1) << "four products a block and the head";
    const auto before = run();
    for (const ParamInfo& p : g.table().params) {
      if (p.kind != ParamKind::weight) continue;
      for (std::size_t j = p.offset; j < p.offset + p.size; ++j)
        host(j) += std::ldexp(std::fabs(host(j)), -10);
    }
    const auto after = run();
    if (precision == Precision::bf16) {
      EXPECT_EQ(after.first, before.first);
      EXPECT_EQ(after.second, before.second);
    } else {
      EXPECT_NE(after.first, before.first) << "the change is large enough for fp32 to see";
      EXPECT_NE(after.second, before.second);
    }
  }
}

namespace {

// How many of the values in `buffers` are not bf16 values (have any of their low 16 bits set).
std::size_t not_bf16(const std::vector<gridlm::Span<const float>>& buffers) {
  using Unmanaged = Kokkos::View<const float*, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  std::size_t count = 0;
  for (const gridlm::Span<const float> b : buffers) {
    auto host =
        Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Unmanaged(b.data(), b.size()));
    for (std::size_t i = 0; i < b.size(); ++i)
      count += (bits_of(host(i)) & 0xffffu) != 0;
  }
  return count;
}

} // namespace

// The activations and output gradients that only products read are stored in bf16, in a
// whole model and in a stage without the head, with the backward split (so that the output
// gradients kept for the weight half can be seen). In fp32 the same buffers are not bf16
// values, which says the check sees the data.
TEST(Bf16, ProductOperandsAreStoredInBf16) {
  const ModelConfig m = model();
  const int B = 2, T = 40;
  const Batch batch(B, T);
  // A stage's input and output gradient live in its memory, as a pipeline's do.
  DeviceBuffer<float> input(std::size_t(B) * T * m.d_model), dout(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) {
    input.host[i] = std::sin(0.37f * float(i));
    dout.host[i] = 0.01f * std::cos(0.11f * float(i));
  }
  input.upload();
  dout.upload();
  for (const StageSpec stage : {StageSpec{}, StageSpec{1, 2, false, false}}) {
    for (const Precision precision : {Precision::bf16, Precision::fp32}) {
      GPT g(m, B, T, stage, nullptr, 1, Backward::split, precision);
      init_parameters(g.params(), g.table(), 5);
      g.zero_grad();
      g.forward_stage(batch.x.data(), input.data(), batch.y.data(), B, T);
      const std::size_t forward = g.product_operands(0).size();
      const std::size_t after_forward = not_bf16(g.product_operands(0));
      g.backward_input(1.0f, stage.head ? nullptr : dout.data());
      ASSERT_GT(g.product_operands(0).size(), forward) << "the kept output gradients";
      const std::size_t after_backward = not_bf16(g.product_operands(0));
      g.backward_weights();
      if (precision == Precision::bf16) {
        EXPECT_EQ(after_forward, 0u) << "stage " << stage.first_block;
        EXPECT_EQ(after_backward, 0u) << "stage " << stage.first_block;
      } else {
        EXPECT_GT(after_forward, 0u);
        EXPECT_GT(after_backward, after_forward);
      }
    }
  }
}

namespace {

float r16(double x) { return round_to_bf16(float(x)); }

} // namespace

// Attention in bf16 against a reference written from the contract, in double with the rounding
// at each documented point: q, k, v and the output gradient rounded; scores, softmax and its
// backward in full precision; the probabilities rounded for their products with v and with the
// output gradient; the score gradients rounded for their products with k and q. Three causal
// row blocks, the last partial. Agreement to 2e-5 of the largest value: leaving out any one of
// the roundings moves a result by about 1e-3 of it.
TEST(Bf16, AttentionRoundsEveryProductOperand) {
  const int B = 1, T = 70, NH = 2, hs = 4, C = NH * hs;
  ASSERT_GT(T, 2 * attention_block);
  const long N = long(B) * T;
  std::vector<float> qkv(std::size_t(N) * 3 * C), dout(std::size_t(N) * C);
  for (std::size_t i = 0; i < qkv.size(); ++i)
    qkv[i] = 1.5f * std::sin(0.913f * float(i) + 0.3f);
  for (std::size_t i = 0; i < dout.size(); ++i)
    dout[i] = std::cos(0.577f * float(i));
  const DeviceBuffer<float> d_qkv(qkv), d_dout(dout);
  Kokkos::View<float*> out("out", N * C), dqkv("dqkv", N * 3 * C);
  std::vector<Kokkos::View<float*>> bufs;
  const auto buffer = [&](std::size_t n) {
    bufs.emplace_back("buffer", n);
    return bufs.back().data();
  };
  const std::size_t heads = std::size_t(N) * C;
  AttentionSaved saved{buffer(heads), buffer(heads), buffer(heads),
                       buffer(std::size_t(B) * NH * attention_scores_per_head(T))};
  AttentionScratch scratch{buffer(heads), buffer(std::size_t(attention_block) * T), buffer(heads),
                           buffer(heads), buffer(heads)};
  attention_forward(out.data(), saved, scratch, d_qkv.data(), B, T, C, NH, Precision::bf16);
  attention_backward(dqkv.data(), scratch, d_dout.data(), saved, B, T, C, NH, GradWrite::overwrite,
                     Precision::bf16);
  const std::vector<float> y = to_host(out), g = to_host(dqkv);

  std::vector<double> ref_y(y.size()), ref_g(g.size());
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int h = 0; h < NH; ++h) {
    // [T][hs] views of this head's q, k, v (rounded) and output gradient (rounded).
    const auto q = [&](int t, int d) { return r16(qkv[std::size_t(t) * 3 * C + h * hs + d]); };
    const auto k = [&](int t, int d) { return r16(qkv[std::size_t(t) * 3 * C + C + h * hs + d]); };
    const auto v = [&](int t, int d) {
      return r16(qkv[std::size_t(t) * 3 * C + 2 * C + h * hs + d]);
    };
    const auto dy = [&](int t, int d) { return r16(dout[std::size_t(t) * C + h * hs + d]); };
    for (int i = 0; i < T; ++i) {
      std::vector<double> p(std::size_t(i) + 1), dp(p.size());
      double mx = -HUGE_VAL, sum = 0.0;
      for (int j = 0; j <= i; ++j) {
        double s = 0.0;
        for (int d = 0; d < hs; ++d)
          s += double(q(i, d)) * k(j, d);
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      for (double& x : p)
        sum += (x = std::exp(x - mx));
      for (double& x : p)
        x /= sum;
      double dot = 0.0;
      for (int j = 0; j <= i; ++j) {
        for (int d = 0; d < hs; ++d) {
          ref_y[std::size_t(i) * C + h * hs + d] += double(r16(p[j])) * v(j, d);
          // dv: dy[i] times the rounded probability, into the v columns of row j.
          ref_g[std::size_t(j) * 3 * C + 2 * C + h * hs + d] += double(r16(p[j])) * dy(i, d);
          dp[j] += double(dy(i, d)) * v(j, d);
        }
        dot += p[j] * dp[j];
      }
      for (int j = 0; j <= i; ++j) {
        const double ds = r16(p[j] * (dp[j] - dot) * scale);
        for (int d = 0; d < hs; ++d) {
          ref_g[std::size_t(i) * 3 * C + h * hs + d] += ds * k(j, d);
          ref_g[std::size_t(j) * 3 * C + C + h * hs + d] += ds * q(i, d);
        }
      }
    }
  }
  const auto expect_close = [](const std::vector<float>& got, const std::vector<double>& want,
                               const char* what) {
    double largest = 0.0, worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      largest = std::max(largest, std::fabs(want[i]));
      worst = std::max(worst, std::fabs(got[i] - want[i]));
    }
    EXPECT_LE(worst, 2e-5 * largest) << what << ": largest value " << largest;
    std::printf("%s: largest difference from the reference %.2e of the largest value\n", what,
                worst / largest);
  };
  expect_close(y, ref_y, "attention output");
  expect_close(g, ref_g, "attention qkv gradient");
}
