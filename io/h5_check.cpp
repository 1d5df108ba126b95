// Formats HDF5 failures for GRIDLM_H5_CHECK from the library's error stack.
#include "io/h5_check.hpp"

#include <string>

#include <fmt/format.h>

namespace gridlm::io::detail {
namespace {

herr_t keep_innermost(unsigned n, const H5E_error2_t* err, void* data) {
  if (n == 0 && err != nullptr && err->desc != nullptr) {
    *static_cast<std::string*>(data) = fmt::format("{} (in {})", err->desc, err->func_name);
  }
  return 0;
}

} // namespace

std::string h5_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail;
}

void throw_h5_error(const char* call, const char* file, int line) {
  std::string detail = h5_error_detail();
  if (detail.empty()) detail = "no detail from HDF5";
  throw Error(
      fmt::format("HDF5 call {} failed: {} ({}:{}; {})", call, detail, file, line, where()));
}

void quiet_hdf5_errors() {
  // A function-local static, so the setting is made once, by the first caller (thread-safe), and
  // later calls only test a flag. Not at load time: HDF5 initialised before MPI_Init would not
  // close itself at MPI_Finalize.
  static const bool quiet = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)quiet;
}

} // namespace gridlm::io::detail
