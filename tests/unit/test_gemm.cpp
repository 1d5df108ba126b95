// layers::matmul (Kokkos Kernels GEMM) against a plain triple loop for every transpose
// combination, and a check that the BLAS underneath is not the slow reference implementation.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "layers/blas_info.hpp"
#include "layers/kernels.hpp"
#include "tests/device_buffer.hpp"

using namespace gridlm::layers;
using gridlm::test::DeviceBuffer;

TEST(Matmul, MatchesTripleLoopForAllTransposes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const long m = 13, k = 21, n = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a(m * k), b(k * n), c0(m * n);
      for (auto* v : {&a, &b, &c0})
        for (float& x : *v)
          x = u(rng);
      const DeviceBuffer<float> da(a), db(b);
      DeviceBuffer<float> dc(c0);
      matmul(dc.data(), da.data(), ta ? Transpose::yes : Transpose::no, db.data(),
             tb ? Transpose::yes : Transpose::no, m, n, k, 0.5f, 2.0f);
      const std::vector<float>& c = dc.download();
      for (long i = 0; i < m; ++i) {
        for (long j = 0; j < n; ++j) {
          double ref = 0.0;
          for (long p = 0; p < k; ++p) {
            const float av = ta ? a[p * m + i] : a[i * k + p];
            const float bv = tb ? b[j * k + p] : b[p * n + j];
            ref += double(av) * double(bv);
          }
          ref = 0.5 * ref + 2.0 * c0[i * n + j];
          EXPECT_NEAR(c[i * n + j], ref, 1e-5) << "ta=" << ta << " tb=" << tb << " i=" << i;
        }
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
