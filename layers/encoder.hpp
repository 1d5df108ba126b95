// Token + learned position embedding. Forward and backward side by side. The token table may be
// one rank's slice of a vocabulary split over a tensor-parallel group: rows [vocab_begin,
// vocab_begin + vocab_local); tokens outside it contribute zero (the group sums the slices).
#pragma once

#include <cstdint>

namespace gridlm::layers {

// out[B,T,C] = wte[tokens[b,t] - vocab_begin, :] (0 outside the slice)
void token_embedding_forward(float* out, const std::int32_t* tokens, const float* wte, int B, int T,
                             int C, long vocab_begin, long vocab_local);
// dwte[tokens[b,t] - vocab_begin, :] += dout[b,t,:] for tokens inside the slice, positions in
// order. `links` (same_token_links of the tokens, device memory; may be null) lets a GPU give
// each (token, column) its own thread: without it a thread per column walks every position.
void token_embedding_backward(float* dwte, const float* dout, const std::int32_t* tokens, int B,
                              int T, int C, long vocab_begin, long vocab_local,
                              const std::int32_t* links = nullptr);
// The positions of each token as chains, for token_embedding_backward on a GPU: links[i] = the
// next position after i holding the same token (-1: none), links[N + i] = 1 where i is the
// token's first position, else 0. links holds 2N; tokens are in [0, V); on the host, O(N + V).
void same_token_links(std::int32_t* links, const std::int32_t* tokens, long N, long V);
// out[b,t,:] += wpe[t,:]
void position_embedding_forward(float* out, const float* wpe, int B, int T, int C);
// dwpe[t,:] += sum over b of dout[b,t,:]
void position_embedding_backward(float* dwpe, const float* dout, int B, int T, int C);

// The whole vocabulary on one rank: out = wte[tokens] + wpe[t], and its backward.
void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     int B, int T, int C);
void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      int B, int T, int C);

} // namespace gridlm::layers
