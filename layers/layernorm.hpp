// LayerNorm over the last dimension (eps 1e-5, as PyTorch). Forward and backward side by side.
#pragma once

namespace gridlm::layers {

// out[N,C] = (inp - mean) * rstd * w + b; saves mean[N], rstd[N] for the backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, long N, int C);
// dinp[N,C] += ..., dw[C] += ..., db[C] += ...
void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, long N, int C);

} // namespace gridlm::layers
