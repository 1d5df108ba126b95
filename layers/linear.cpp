// Linear layer: GEMMs through the vendor BLAS, bias loops in Kokkos.
#include "layers/linear.hpp"

#include "layers/kernels.hpp"

namespace gridlm::layers {

void linear_forward(float* out, const float* inp, const float* w, const float* bias, long N, int C,
                    int OC, Precision precision) {
  if (bias != nullptr) {
    for_each_element(
        "layers::Linear::forward_bias", N, OC,
        KOKKOS_LAMBDA(long n, long j) { out[n * OC + j] = bias[j]; });
  }
  matmul(out, inp, Transpose::no, w, Transpose::yes, N, OC, C, 1.0f, bias != nullptr ? 1.0f : 0.0f,
         precision);
}

void linear_backward_input(float* dinp, const float* dout, const float* w, long N, int C, int OC,
                           GradWrite dinp_write, Precision precision) {
  matmul(dinp, dout, Transpose::no, w, Transpose::no, N, C, OC, 1.0f,
         dinp_write == GradWrite::overwrite ? 0.0f : 1.0f, precision);
}

void linear_backward_weight(float* dw, float* dbias, const float* dout, const float* inp, long N,
                            int C, int OC, Precision precision) {
  matmul(dw, dout, Transpose::yes, inp, Transpose::no, OC, C, N, 1.0f, 1.0f, precision);
  if (dbias != nullptr) {
    column_sums<1>(
        "layers::Linear::backward_bias", {dbias}, N, OC,
        KOKKOS_LAMBDA(long n, long j, float(&t)[1]) { t[0] = dout[n * OC + j]; });
  }
}

void linear_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                     const float* w, long N, int C, int OC, GradWrite dinp_write,
                     Precision precision) {
  if (dinp != nullptr) linear_backward_input(dinp, dout, w, N, C, OC, dinp_write, precision);
  linear_backward_weight(dw, dbias, dout, inp, N, C, OC, precision);
}

} // namespace gridlm::layers
