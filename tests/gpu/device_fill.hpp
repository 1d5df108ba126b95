// Small CUDA kernels the NCCL backend's tests use to fill device buffers with values whose
// collective results are known exactly. Test code only: built into the gpu test target, not into
// any gridlm library.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace gridlm::test {

// data[i] = offset + scale * i, for i < n, on `stream`.
void device_fill_affine(float* data, std::size_t n, float offset, float scale, cudaStream_t stream);

} // namespace gridlm::test
