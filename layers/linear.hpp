// Linear layer with PyTorch's weight layout: out = inp @ w^T + bias, w is [OC, C].
// Forward and backward side by side. Precision::bf16: the products' operands (inp, w, dout) hold
// bf16 values (matmul in kernels.hpp).
#pragma once

#include "layers/kernels.hpp"

namespace gridlm::layers {

// out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] (bias may be null)
void linear_forward(float* out, const float* inp, const float* w, const float* bias, long N, int C,
                    int OC, Precision precision = Precision::fp32);
// dinp[N,C] += dout @ w; dw[OC,C] += dout^T @ inp; dbias[OC] += sum over rows of dout
// (dinp or dbias may be null to skip them). With GradWrite::overwrite, dinp = dout @ w instead:
// saves zeroing a buffer that only this layer writes.
void linear_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                     const float* w, long N, int C, int OC,
                     GradWrite dinp_write = GradWrite::accumulate,
                     Precision precision = Precision::fp32);
// The two halves of linear_backward, for a backward split as zero-bubble schedules do: the
// input gradient (needed at once by the previous layer) and the weight gradient (which can
// wait). dinp[N,C] (+)= dout @ w; dw[OC,C] += dout^T @ inp, dbias[OC] += column sums of dout.
void linear_backward_input(float* dinp, const float* dout, const float* w, long N, int C, int OC,
                           GradWrite dinp_write = GradWrite::accumulate,
                           Precision precision = Precision::fp32);
void linear_backward_weight(float* dw, float* dbias, const float* dout, const float* inp, long N,
                            int C, int OC, Precision precision = Precision::fp32);

} // namespace gridlm::layers
