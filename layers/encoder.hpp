// Token + learned position embedding. Forward and backward side by side.
#pragma once

#include <cstdint>

namespace gridlm::layers {

// out[B,T,C] = wte[tokens[b,t], :] + wpe[t, :]
void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     int B, int T, int C);
// dwte[tokens[b,t], :] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]
void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      int B, int T, int C);

} // namespace gridlm::layers
