// GRIDLM_CUDA_CHECK and GRIDLM_NCCL_CHECK: a failing CUDA runtime or NCCL call throws
// gridlm::Error naming the call, file, line, rank, host and grid coordinates.
#pragma once

#include <cuda_runtime.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::detail {
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
} // namespace gridlm::detail

#define GRIDLM_CUDA_CHECK(call)                                                                    \
  do {                                                                                             \
    const cudaError_t gridlm_cuda_rc_ = (call);                                                    \
    if (gridlm_cuda_rc_ != cudaSuccess)                                                            \
      ::gridlm::detail::throw_cuda_error(gridlm_cuda_rc_, #call, __FILE__, __LINE__);              \
  } while (0)
