// Matrix products for the layers, through Kokkos Kernels (vendor BLAS on CPU, cuBLAS on GPU).
// Row-major (LayoutRight) float matrices, as every activation buffer in gridlm is laid out.
#pragma once

#include <Kokkos_Core.hpp>

namespace gridlm::layers {

using Matrix = Kokkos::View<float**, Kokkos::LayoutRight>;
using ConstMatrix = Kokkos::View<const float**, Kokkos::LayoutRight>;

enum class Trans { no, yes };

// out = alpha * op(a) * op(b) + beta * out. Shapes are checked; a mismatch throws
// gridlm::Error naming them.
void gemm(Matrix out, ConstMatrix a, Trans trans_a, ConstMatrix b, Trans trans_b,
          float alpha = 1.0f, float beta = 0.0f);

} // namespace gridlm::layers
