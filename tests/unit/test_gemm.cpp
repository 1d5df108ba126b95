// layers::matmul (Kokkos Kernels GEMM; cuBLAS's tensor cores for bf16 products on a GPU) and
// matmul_batched against a plain loop in double for every transpose combination, and a check
// that the BLAS underneath is not the slow reference implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "layers/blas_info.hpp"
#include "layers/kernels.hpp"
#include "tests/device_buffer.hpp"

using namespace gridlm::layers;
using gridlm::test::DeviceBuffer;

namespace {

struct Product {
  long m, n, k;
  bool ta, tb;
};

std::vector<float> random_values(std::size_t n, std::mt19937& rng, bool bf16) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v)
    x = bf16 ? round_to_bf16(u(rng)) : u(rng);
  return v;
}

// Checks got = alpha * op(a) @ op(b) + beta * c0 for `batch` matrices stored back to back, each
// element within `tolerance` of sum |alpha a b| + |beta c0| (what the rounding of fp32 sums is
// measured against).
void expect_product(const std::vector<float>& got, const std::vector<float>& a,
                    const std::vector<float>& b, const std::vector<float>& c0, const Product& p,
                    float alpha, float beta, long batch, double tolerance) {
  const long m = p.m, n = p.n, k = p.k;
  for (long s = 0; s < batch; ++s) {
    const float* as = a.data() + s * m * k;
    const float* bs = b.data() + s * k * n;
    for (long i = 0; i < m; ++i) {
      for (long j = 0; j < n; ++j) {
        double ref = 0.0, size = 0.0;
        for (long q = 0; q < k; ++q) {
          const double term =
              double(p.ta ? as[q * m + i] : as[i * k + q]) * (p.tb ? bs[j * k + q] : bs[q * n + j]);
          ref += term;
          size += std::fabs(term);
        }
        const std::size_t at = std::size_t(s * m * n + i * n + j);
        ref = alpha * ref + beta * double(c0[at]);
        size = std::fabs(alpha) * size + std::fabs(beta * double(c0[at]));
        ASSERT_LE(std::fabs(got[at] - ref), tolerance * size)
            << "ta=" << p.ta << " tb=" << p.tb << " matrix " << s << " (" << i << ", " << j
            << "): " << got[at] << " against " << ref;
      }
    }
  }
}

} // namespace

TEST(Matmul, MatchesTripleLoopForAllTransposes) {
  std::mt19937 rng(7);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Product p{13, 9, 21, ta, tb};
      const std::vector<float> a = random_values(p.m * p.k, rng, false),
                               b = random_values(p.k * p.n, rng, false),
                               c0 = random_values(p.m * p.n, rng, false);
      const DeviceBuffer<float> da(a), db(b);
      DeviceBuffer<float> dc(c0);
      matmul(dc.data(), da.data(), ta ? Transpose::yes : Transpose::no, db.data(),
             tb ? Transpose::yes : Transpose::no, p.m, p.n, p.k, 0.5f, 2.0f);
      expect_product(dc.download(), a, b, c0, p, 0.5f, 2.0f, 1, 1e-6);
    }
  }
}

// bf16 products of bf16 values, single and batched, in every transpose combination: the result
// of an fp32 accumulation (1e-6 of the sum of magnitudes; a bf16 result or accumulator would be
// off by ~4e-3 of it). On a GPU these run on the tensor cores (cublasGemmEx and its strided
// batched form); on a CPU as fp32 products, which for bf16 values are the same.
TEST(Matmul, Bf16ProductsOfBf16ValuesAccumulateInFp32) {
  std::mt19937 rng(11);
  const long batch = 3;
  for (const Precision precision : {Precision::bf16, Precision::fp32}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Product p{37, 19, 300, ta, tb};
        const long a_size = p.m * p.k, b_size = p.k * p.n, c_size = p.m * p.n;
        const std::vector<float> a = random_values(batch * a_size, rng, true),
                                 b = random_values(batch * b_size, rng, true),
                                 c0 = random_values(batch * c_size, rng, true);
        const DeviceBuffer<float> da(a), db(b);
        DeviceBuffer<float> one(c0), many(c0);
        const Transpose op_a = ta ? Transpose::yes : Transpose::no,
                        op_b = tb ? Transpose::yes : Transpose::no;
        matmul(one.data(), da.data(), op_a, db.data(), op_b, p.m, p.n, p.k, 1.0f, 0.5f, precision);
        expect_product(one.download(), a, b, c0, p, 1.0f, 0.5f, 1, 1e-6);
        matmul_batched(many.data(), c_size, da.data(), a_size, op_a, db.data(), b_size, op_b, p.m,
                       p.n, p.k, 1.0f, 0.5f, batch, precision);
        expect_product(many.download(), a, b, c0, p, 1.0f, 0.5f, batch, 1e-6);
      }
    }
  }
}

TEST(Blas, IsNotTheReferenceImplementation) {
  const std::string lib = blas_library_path();
  SCOPED_TRACE("sgemm_ comes from " + lib);
  EXPECT_FALSE(lib.empty());
  EXPECT_FALSE(is_reference_blas(lib))
      << "GEMMs would run on the reference BLAS, ten times slower; run scripts/install-deps.sh "
         "or point libblas.so.3 at OpenBLAS with update-alternatives";
  EXPECT_TRUE(is_reference_blas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"));
  EXPECT_FALSE(is_reference_blas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"));
}
