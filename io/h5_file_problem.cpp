// What is wrong with a file that should be HDF5 (h5_file_problem.hpp).
#include "io/h5_file_problem.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <hdf5.h>

#include "io/h5_check.hpp"

namespace gridlm::io {
namespace {

// H5Fis_accessible replaced H5Fis_hdf5 in 1.12; Debian 12 ships 1.10.
htri_t is_hdf5(const std::string& path) {
#if H5_VERSION_GE(1, 12, 0)
  return H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
  return H5Fis_hdf5(path.c_str());
#endif
}

// The first bytes of a file that is not HDF5, shown as text when they are text.
std::string first_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char buffer[24] = {};
  in.read(buffer, sizeof buffer);
  const std::string head(buffer, std::size_t(in.gcount()));
  bool text = true;
  for (unsigned char ch : head)
    text = text && (std::isprint(ch) || ch == '\n' || ch == '\t' || ch == '\r');
  if (text) {
    std::string shown = head.substr(0, head.find('\n'));
    return fmt::format("it begins with text '{}'", shown);
  }
  std::string hex;
  for (std::size_t i = 0; i < head.size() && i < 8; ++i)
    hex += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(head[i]));
  return fmt::format("it begins with the bytes {}", hex);
}

} // namespace

bool is_hdf5_file(const std::string& path) {
  detail::quiet_hdf5_errors();
  return is_hdf5(path) > 0;
}

std::string hdf5_file_problem(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return errno == ENOENT || errno == ENOTDIR ? "does not exist"
                                               : fmt::format("cannot be read: {}", strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return "is a directory, not a file";
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (access(path.c_str(), R_OK) != 0) return "cannot be read: no permission";
  if (st.st_size == 0) return "is empty (0 bytes)";
  if (!is_hdf5_file(path)) return "is not an HDF5 file: " + first_bytes(path);
  return "";
}

std::string damaged_hdf5_message(const std::string& path) {
  struct stat st {};
  const long long size = stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  const std::string detail = detail::h5_error_detail();
  return fmt::format("'{}' is an HDF5 file that cannot be opened: damaged or cut short ({} bytes; "
                     "HDF5 says: {}); copy or write it again",
                     path, size, detail.empty() ? "nothing" : detail);
}

} // namespace gridlm::io
