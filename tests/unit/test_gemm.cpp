// GEMM through Kokkos Kernels against a plain triple loop, for every transpose combination,
// and a check that the BLAS underneath is not the slow reference implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "layers/blas_info.hpp"
#include "layers/gemm.hpp"
#include "parallel/diagnostics.hpp"

using namespace gridlm::layers;

namespace {

Matrix random_matrix(const std::string& label, int rows, int cols, std::mt19937& rng) {
  Matrix m(label, rows, cols);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      m(i, j) = u(rng);
  return m;
}

float at(const Matrix& m, Trans t, int i, int j) { return t == Trans::no ? m(i, j) : m(j, i); }

} // namespace

TEST(Gemm, MatchesTripleLoopForAllTransposes) {
  std::mt19937 rng(7);
  const int m = 13, k = 21, n = 9;
  for (Trans ta : {Trans::no, Trans::yes}) {
    for (Trans tb : {Trans::no, Trans::yes}) {
      Matrix a = ta == Trans::no ? random_matrix("a", m, k, rng) : random_matrix("a", k, m, rng);
      Matrix b = tb == Trans::no ? random_matrix("b", k, n, rng) : random_matrix("b", n, k, rng);
      Matrix c = random_matrix("c", m, n, rng);
      Matrix c0("c0", m, n);
      Kokkos::deep_copy(c0, c);
      gemm(c, a, ta, b, tb, 0.5f, 2.0f);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double ref = 0.0;
          for (int p = 0; p < k; ++p)
            ref += double(at(a, ta, i, p)) * double(at(b, tb, p, j));
          ref = 0.5 * ref + 2.0 * c0(i, j);
          EXPECT_NEAR(c(i, j), ref, 1e-5) << "i=" << i << " j=" << j;
        }
      }
    }
  }
}

TEST(Gemm, RefusesMismatchedShapes) {
  Matrix a("a", 4, 3), b("b", 4, 5), c("c", 4, 5);
  EXPECT_THROW(gemm(c, a, Trans::no, b, Trans::no), gridlm::Error);
  EXPECT_NO_THROW(gemm(c, a, Trans::no, Matrix("b", 3, 5), Trans::no));
}

TEST(Blas, IsNotTheReferenceImplementation) {
  const std::string lib = blas_library_path();
  SCOPED_TRACE("sgemm_ comes from " + lib);
  EXPECT_FALSE(lib.empty());
  EXPECT_FALSE(is_reference_blas(lib))
      << "GEMMs would run on the reference BLAS, ten times slower; run scripts/install-deps.sh "
         "or point libblas.so.3 at OpenBLAS with update-alternatives";
}
