// GRIDLM_H5_CHECK: the one way gridlm calls HDF5. A negative return (HDF5's failure value for
// herr_t and hid_t alike) throws gridlm::Error naming the call, file, line, rank, host, grid
// coordinates and the innermost message of HDF5's error stack.
#pragma once

#include <hdf5.h>

#include <string>

#include "parallel/diagnostics.hpp"

namespace gridlm::io::detail {
[[noreturn]] void throw_h5_error(const char* call, const char* file, int line);
// The innermost message of HDF5's error stack ("" when empty), which is then cleared: for
// errors gridlm words itself but where HDF5's reason helps (a truncated file, say).
std::string h5_error_detail();
// Turns off HDF5's automatic printing of error stacks on stderr, once per process (later calls
// do nothing): GRIDLM_H5_CHECK reports errors instead, with HDF5's explanation. io's entry
// points that open, create or check a file call it before their first HDF5 call, so no code
// outside io has to.
void quiet_hdf5_errors();
} // namespace gridlm::io::detail

#define GRIDLM_H5_CHECK(call)                                                                      \
  ([&]() {                                                                                         \
    const auto gridlm_h5_rc_ = (call);                                                             \
    if (gridlm_h5_rc_ < 0) ::gridlm::io::detail::throw_h5_error(#call, __FILE__, __LINE__);        \
    return gridlm_h5_rc_;                                                                          \
  }())
