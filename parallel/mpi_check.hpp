// GRIDLM_MPI_CHECK: the one way gridlm calls MPI. A failing call throws gridlm::Error naming
// the call, file, line, rank, host and grid coordinates (MPI_ERRORS_RETURN is set at start-up,
// so MPI hands errors back instead of aborting without context).
#pragma once

#include <mpi.h>

#include <string>

#include "parallel/diagnostics.hpp"

namespace gridlm::detail {
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);
} // namespace gridlm::detail

#define GRIDLM_MPI_CHECK(call)                                                                     \
  do {                                                                                             \
    const int gridlm_mpi_rc_ = (call);                                                             \
    if (gridlm_mpi_rc_ != MPI_SUCCESS)                                                             \
      ::gridlm::detail::throw_mpi_error(gridlm_mpi_rc_, #call, __FILE__, __LINE__);                \
  } while (0)
