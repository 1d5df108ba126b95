// A test-only LD_PRELOAD library: one rank's writes to matching files fail with ENOSPC once the
// process has written a given number of bytes to them, and every later one fails too, as a full
// file system, a quota or a full storage target fails that rank alone (which a free-space check
// up front cannot see). It wraps write, pwrite, pwrite64, writev, pwritev and pwritev2, the calls
// under MPI-IO, HDF5 and gridlm's direct I/O; writes from inside the C library itself (fwrite)
// pass. Ranks are named by PMI_RANK (MPICH's launchers). Set in the environment:
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
std::atomic<bool> full{false}; // once a write failed, every later one does

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
  if (full.load() || written.load() + static_cast<long long>(bytes) > limit) {
    full = true;
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

std::size_t total(const struct iovec* iov, int count) {
  std::size_t bytes = 0;
  for (int i = 0; i < count; ++i)
    bytes += iov[i].iov_len;
  return bytes;
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

ssize_t writev(int fd, const struct iovec* iov, int count) {
  static const auto next = real<ssize_t (*)(int, const struct iovec*, int)>("writev");
  if (fails(fd, total(iov, count))) return -1;
  return next(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  static const auto next = real<ssize_t (*)(int, const struct iovec*, int, off_t)>("pwritev");
  if (fails(fd, total(iov, count))) return -1;
  return next(fd, iov, count, offset);
}

ssize_t pwritev2(int fd, const struct iovec* iov, int count, off_t offset, int flags) {
  static const auto next = real<ssize_t (*)(int, const struct iovec*, int, off_t, int)>("pwritev2");
  if (fails(fd, total(iov, count))) return -1;
  return next(fd, iov, count, offset, flags);
}

} // extern "C"
