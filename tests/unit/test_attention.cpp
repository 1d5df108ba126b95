// Attention's (sequence, head) pairs in launches (AttentionScratch::heads_at_once): a GPU runs
// every pair's block in one batched GEMM and one softmax launch, a CPU one pair at a time. The
// grouping must not change a bit of the forward, the saved probabilities or the backward, in
// fp32 and in bf16, whether the groups divide the pairs or not.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include "layers/attention.hpp"
#include "tests/device_buffer.hpp"

namespace gridlm::layers {
namespace {

struct Result {
  std::vector<float> out, att, dqkv;
};

using test::to_host;

Kokkos::View<float*> filled(const std::string& label, std::size_t n, float a, float b) {
  Kokkos::View<float*> d(label, n);
  auto m = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < n; ++i)
    m(i) = 1.5f * std::sin(a * float(i) + b);
  Kokkos::deep_copy(d, m);
  return d;
}

// Forward and backward of B sequences of T tokens, NH heads of 4, `heads_at_once` pairs a launch.
Result run(long heads_at_once, Precision precision) {
  const int B = 3, T = 70, NH = 2, C = NH * 4;
  const std::size_t N = std::size_t(B) * T, heads = N * C;
  const Kokkos::View<float*> qkv = filled("qkv", N * 3 * C, 0.913f, 0.3f),
                             dout = filled("dout", N * C, 0.577f, 1.1f), out("out", N * C),
                             dqkv("dqkv", N * 3 * C),
                             att("att", std::size_t(B) * NH * attention_scores_per_head(T));
  std::vector<Kokkos::View<float*>> bufs;
  const auto buffer = [&](std::size_t n) {
    bufs.emplace_back("buffer", n);
    return bufs.back().data();
  };
  const AttentionSaved saved{buffer(heads), buffer(heads), buffer(heads), att.data()};
  const AttentionScratch scratch{
      buffer(heads), buffer(std::size_t(heads_at_once) * attention_block * T),
      buffer(heads), buffer(heads),
      buffer(heads), heads_at_once};
  attention_forward(out.data(), saved, scratch, qkv.data(), B, T, C, NH, precision);
  attention_backward(dqkv.data(), scratch, dout.data(), saved, B, T, C, NH, GradWrite::overwrite,
                     precision);
  return {to_host(out), to_host(att), to_host(dqkv)};
}

// Bit for bit where products run one at a time on the host BLAS either way; a GPU's batched
// GEMM may sum in another order than its single one.
void expect_same(const std::vector<float>& want, const std::vector<float>& got,
                 const std::string& what) {
  using Memory = Kokkos::DefaultExecutionSpace::memory_space;
  const bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible;
  ASSERT_EQ(want.size(), got.size());
  float largest = 0.0f;
  for (float x : want)
    largest = std::max(largest, std::abs(x));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool same = host ? want[i] == got[i] : std::abs(want[i] - got[i]) <= 1e-5f * largest;
    differ += same ? 0 : 1;
  }
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << want.size() << " values differ";
}

TEST(Attention, HeadsInOneLaunchGiveTheResultsOfOneAtATime) {
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    const std::string name = precision == Precision::fp32 ? "fp32" : "bf16";
    const Result one = run(1, precision);
    // 6 pairs: in groups of 4 (the last group short) and all at once.
    for (long g : {4L, 6L}) {
      const Result grouped = run(g, precision);
      const std::string what = name + ", " + std::to_string(g) + " pairs a launch";
      expect_same(one.out, grouped.out, what + ", output");
      expect_same(one.att, grouped.att, what + ", probabilities");
      expect_same(one.dqkv, grouped.dqkv, what + ", qkv gradient");
    }
  }
}

TEST(Attention, AGpuTakesEveryHeadInOneLaunchACpuOne) {
  using Memory = Kokkos::DefaultExecutionSpace::memory_space;
  const bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible;
  EXPECT_EQ(attention_heads_per_launch(24), host ? 1 : 24);
}

} // namespace
} // namespace gridlm::layers
