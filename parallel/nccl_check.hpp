// GRIDLM_NCCL_CHECK: a failing NCCL call throws gridlm::Error naming the call, file, line,
// rank, host, grid coordinates and NCCL's own explanation.
#pragma once

#include <nccl.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::detail {
[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line);
} // namespace gridlm::detail

#define GRIDLM_NCCL_CHECK(call)                                                                    \
  do {                                                                                             \
    const ncclResult_t gridlm_nccl_rc_ = (call);                                                   \
    if (gridlm_nccl_rc_ != ncclSuccess)                                                            \
      ::gridlm::detail::throw_nccl_error(gridlm_nccl_rc_, #call, __FILE__, __LINE__);              \
  } while (0)
