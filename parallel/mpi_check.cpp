// Formats MPI failures for GRIDLM_MPI_CHECK.
#include "parallel/mpi_check.hpp"

#include <fmt/format.h>

namespace gridlm::detail {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    fmt::format_to_n(text, 32, "code {}", code);
  throw Error(fmt::format("MPI call {} failed: {} ({}:{}; {})", call, text, file, line, where()));
}

} // namespace gridlm::detail
