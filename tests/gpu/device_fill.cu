// CUDA kernels behind device_fill.hpp.
#include "tests/gpu/device_fill.hpp"

#include "parallel/cuda_check.hpp"

namespace gridlm::test {
namespace {

__global__ void fill_affine_kernel(float* data, std::size_t n, float offset, float scale) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = offset + scale * static_cast<float>(i);
}

__global__ void fill_affine_late_kernel(float* data, std::size_t n, float offset, float scale,
                                        long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = offset + scale * static_cast<float>(i);
}

} // namespace

void device_fill_affine_late(float* data, std::size_t n, float offset, float scale,
                             cudaStream_t stream, int milliseconds) {
  if (n == 0) return;
  int device = 0, khz = 0;
  GRIDLM_CUDA_CHECK(cudaGetDevice(&device));
  GRIDLM_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  constexpr unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  fill_affine_late_kernel<<<blocks, threads, 0, stream>>>(
      data, n, offset, scale, static_cast<long long>(khz) * milliseconds);
  GRIDLM_CUDA_CHECK(cudaGetLastError());
}

void device_fill_affine(float* data, std::size_t n, float offset, float scale,
                        cudaStream_t stream) {
  if (n == 0) return;
  constexpr unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  fill_affine_kernel<<<blocks, threads, 0, stream>>>(data, n, offset, scale);
  GRIDLM_CUDA_CHECK(cudaGetLastError());
}

} // namespace gridlm::test
