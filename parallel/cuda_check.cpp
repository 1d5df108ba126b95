// Formats CUDA runtime failures for GRIDLM_CUDA_CHECK.
#include "parallel/cuda_check.hpp"

#include <fmt/format.h>

namespace gridlm::detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw Error(fmt::format("CUDA call {} failed: {} ({}) ({}:{}; {})", call,
                          cudaGetErrorString(code), cudaGetErrorName(code), file, line, where()));
}

} // namespace gridlm::detail
