// GELU, tanh approximation (PyTorch's approximate='tanh'). Forward and backward side by side.
#pragma once

#include "layers/kernels.hpp"

namespace gridlm::layers {

// out[N] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_forward(float* out, const float* inp, long N);
// dinp[N] += gelu'(inp) * dout (with GradWrite::overwrite: dinp = ...)
void gelu_backward(float* dinp, const float* inp, const float* dout, long N,
                   GradWrite write = GradWrite::accumulate);

} // namespace gridlm::layers
