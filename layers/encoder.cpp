// Embedding lookup and its scatter-add backward.
#include "layers/encoder.hpp"

#include "layers/kernels.hpp"

namespace gridlm::layers {

void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     int B, int T, int C) {
  for_each(
      "layers::Encoder::forward", long(B) * T, KOKKOS_LAMBDA(long bt) {
        const long t = bt % T;
        const float* te = wte + long(tokens[bt]) * C;
        const float* pe = wpe + t * C;
        float* o = out + bt * C;
        for (int i = 0; i < C; ++i)
          o[i] = te[i] + pe[i];
      });
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      int B, int T, int C) {
  // Rows of dwte are shared between positions holding the same token: each column block owns
  // its columns of dwte and dwpe, so the scatter has no races when blocks run in parallel.
  for_each(
      "layers::Encoder::backward", column_blocks(C), KOKKOS_LAMBDA(long blk) {
        const int i0 = int(blk) * column_block, i1 = i0 + column_block < C ? i0 + column_block : C;
        for (long bt = 0; bt < long(B) * T; ++bt) {
          const float* d = dout + bt * C;
          float* te = dwte + long(tokens[bt]) * C;
          float* pe = dwpe + (bt % T) * C;
          for (int i = i0; i < i1; ++i) {
            te[i] += d[i];
            pe[i] += d[i];
          }
        }
      });
}

} // namespace gridlm::layers
