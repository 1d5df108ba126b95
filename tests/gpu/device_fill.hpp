// Small CUDA kernels the NCCL backend's tests use to fill device buffers with values whose
// collective results are known exactly. Test code only: built into the gpu test target, not into
// any gridlm library.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace gridlm::test {

// data[i] = offset + scale * i, for i < n, on `stream`.
void device_fill_affine(float* data, std::size_t n, float offset, float scale, cudaStream_t stream);
// The same after the kernel has spun for about `milliseconds` on the GPU: a producer still
// running when the host goes on to queue what reads its output.
void device_fill_affine_late(float* data, std::size_t n, float offset, float scale,
                             cudaStream_t stream, int milliseconds);

} // namespace gridlm::test
