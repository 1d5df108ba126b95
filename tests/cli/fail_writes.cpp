// A test-only LD_PRELOAD library: one rank's writes to one file fail with ENOSPC once it has
// written a given number of bytes to it, as a full file system, a quota or a full storage target
// fails that rank alone (which a free-space check up front cannot see). It wraps the C library's
// write calls, below MPI-IO, HDF5 and gridlm's direct I/O alike. Set in the environment:
//   GRIDLM_TEST_FAIL_RANK    the rank (PMI_RANK, as mpiexec numbers them) whose writes fail, or
//                            "all"; unset: nothing fails
//   GRIDLM_TEST_FAIL_SUFFIX  the end of the path of the file they fail on (default ".partial")
//   GRIDLM_TEST_FAIL_AFTER   bytes written to such files before the first failure (default 0)
#include <dlfcn.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::atomic<long long> written{0};

// Whether fd is a file this process's writes fail on.
bool targeted(int fd) {
  const char* rank = std::getenv("GRIDLM_TEST_FAIL_RANK");
  const char* me = std::getenv("PMI_RANK");
  if (rank == nullptr || me == nullptr) return false;
  if (std::strcmp(rank, "all") != 0 && std::strcmp(rank, me) != 0) return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  const char* suffix = std::getenv("GRIDLM_TEST_FAIL_SUFFIX");
  const std::string want = suffix != nullptr ? suffix : ".partial";
  const std::string got(path, std::size_t(n));
  return got.size() >= want.size() && got.compare(got.size() - want.size(), want.size(), want) == 0;
}

// Whether a write of `bytes` to fd fails (errno set); else it counts.
bool fails(int fd, std::size_t bytes) {
  if (!targeted(fd)) return false;
  const char* after = std::getenv("GRIDLM_TEST_FAIL_AFTER");
  const long long limit = after != nullptr ? std::atoll(after) : 0;
  if (written.load() + static_cast<long long>(bytes) > limit) {
    errno = ENOSPC;
    return true;
  }
  written += static_cast<long long>(bytes);
  return false;
}

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

} // namespace

extern "C" {

ssize_t write(int fd, const void* data, size_t bytes) {
  static const auto next = real<ssize_t (*)(int, const void*, size_t)>("write");
  if (fails(fd, bytes)) return -1;
  return next(fd, data, bytes);
}

ssize_t pwrite(int fd, const void* data, size_t bytes, off_t offset) {
  static const auto next = real<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  if (fails(fd, bytes)) return -1;
  return next(fd, data, bytes, offset);
}

ssize_t pwrite64(int fd, const void* data, size_t bytes, off64_t offset) {
  static const auto next = real<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  if (fails(fd, bytes)) return -1;
  return next(fd, data, bytes, offset);
}

ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  static const auto next = real<ssize_t (*)(int, const struct iovec*, int, off_t)>("pwritev");
  std::size_t bytes = 0;
  for (int i = 0; i < count; ++i)
    bytes += iov[i].iov_len;
  if (fails(fd, bytes)) return -1;
  return next(fd, iov, count, offset);
}

} // extern "C"
