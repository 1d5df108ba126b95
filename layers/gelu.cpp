// GELU kernels.
#include "layers/gelu.hpp"

#include <cmath>

#include "layers/fast_math.hpp"
#include "layers/kernels.hpp"

namespace gridlm::layers {
namespace {
constexpr float gelu_scale = 0.7978845608028654f; // sqrt(2 / pi)

KOKKOS_INLINE_FUNCTION float gelu_derivative(float x) {
  const float u = gelu_scale * (x + 0.044715f * x * x * x);
  const float th = fast_tanh(u);
  const float sech2 = 1.0f - th * th;
  const float du = gelu_scale * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
}
} // namespace

void gelu_forward(float* out, const float* inp, long N) {
  for_each(
      "layers::GELU::forward", N, KOKKOS_LAMBDA(long i) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + fast_tanh(gelu_scale * (x + 0.044715f * x * x * x)));
      });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, long N, GradWrite write) {
  const bool overwrite = write == GradWrite::overwrite;
  // Two loops rather than a select inside one: the select kept the loop from vectorising.
  if (overwrite) {
    for_each(
        "layers::GELU::backward", N,
        KOKKOS_LAMBDA(long i) { dinp[i] = gelu_derivative(inp[i]) * dout[i]; });
  } else {
    for_each(
        "layers::GELU::backward", N,
        KOKKOS_LAMBDA(long i) { dinp[i] += gelu_derivative(inp[i]) * dout[i]; });
  }
}

} // namespace gridlm::layers
