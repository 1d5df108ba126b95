// Direct (O_DIRECT) transfers of contiguous file runs through an aligned staging buffer.
#include "io/direct_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::io {

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}
namespace {

std::uint64_t round_down(std::uint64_t x) { return x / DirectFile::block() * DirectFile::block(); }
std::uint64_t round_up(std::uint64_t x) { return round_down(x + DirectFile::block() - 1); }

// pwrite until all is written; the errno of a failure, else 0. `written` says how far it got.
int write_all(int fd, const unsigned char* data, std::uint64_t size, std::uint64_t offset,
              std::uint64_t& written) {
  written = 0;
  while (written < size) {
    const ssize_t n = ::pwrite(fd, data + written, size - written, off_t(offset + written));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    written += std::uint64_t(n);
    // A direct write cut short off a block boundary cannot go on direct: the caller finishes it.
    if (written < size && written % DirectFile::block() != 0) return 0;
  }
  return 0;
}

// pread until `size` bytes or the end of the file; the errno of a failure, else 0.
int read_all(int fd, unsigned char* data, std::uint64_t size, std::uint64_t offset,
             std::uint64_t& got) {
  got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, data + got, size - got, off_t(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
    got += std::uint64_t(n);
    if (got % DirectFile::block() != 0) break; // a short read off a block boundary: the file's end
  }
  return 0;
}

} // namespace

std::optional<FlatRun> contiguous_run(const std::vector<std::uint64_t>& start,
                                      const std::vector<std::uint64_t>& count,
                                      const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t c : count)
    n *= c;
  if (n == 0) return FlatRun{0, 0};
  std::size_t outer = 0; // the first dimension with more than one element
  while (outer + 1 < shape.size() && count[outer] == 1)
    ++outer;
  for (std::size_t d = outer + 1; d < shape.size(); ++d) {
    if (count[d] != shape[d]) return std::nullopt;
  }
  std::uint64_t first = 0;
  for (std::size_t d = 0; d < shape.size(); ++d)
    first = first * shape[d] + start[d];
  return FlatRun{first, n};
}

void DirectFile::Free::operator()(unsigned char* p) const { std::free(p); }

std::uint64_t DirectFile::block() {
  static const std::uint64_t size =
      std::max<std::uint64_t>(4096, static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
  return size;
}

std::unique_ptr<DirectFile> DirectFile::open(const std::string& path, Mode mode) {
  const int access = mode == Mode::write ? O_WRONLY : O_RDONLY;
  const int direct = ::open(path.c_str(), access | O_DIRECT | O_CLOEXEC);
  if (direct < 0) return nullptr;
  const int buffered = ::open(path.c_str(), access | O_CLOEXEC);
  auto* staging = static_cast<unsigned char*>(std::aligned_alloc(block(), staging_bytes));
  if (buffered < 0 || staging == nullptr) {
    ::close(direct);
    if (buffered >= 0) ::close(buffered);
    std::free(staging);
    return nullptr;
  }
  return std::unique_ptr<DirectFile>(new DirectFile(path, mode, direct, buffered, staging));
}

DirectFile::DirectFile(std::string path, Mode mode, int direct_fd, int buffered_fd,
                       unsigned char* staging)
    : path_(std::move(path)), mode_(mode), direct_fd_(direct_fd), buffered_fd_(buffered_fd),
      staging_(staging) {}

DirectFile::~DirectFile() {
  ::close(direct_fd_);
  ::close(buffered_fd_);
}

void DirectFile::fail(const char* what, std::uint64_t offset, std::uint64_t size, int error) {
  throw Error(fmt::format("cannot {} {} bytes at byte {} of '{}': {}", what, size, offset, path_,
                          std::strerror(error)));
}

void DirectFile::write_buffered(std::uint64_t offset, const unsigned char* data,
                                std::uint64_t size) {
  std::uint64_t written = 0;
  while (written < size) {
    std::uint64_t n = 0;
    const int error = write_all(buffered_fd_, data + written, size - written, offset + written, n);
    if (error != 0) fail("write", offset + written, size - written, error);
    written += n;
  }
}

void DirectFile::write(std::uint64_t offset, const void* data, std::uint64_t size) {
  if (mode_ != Mode::write) fail("write", offset, size, EBADF);
  const auto* bytes = static_cast<const unsigned char*>(data);
  const std::uint64_t end = offset + size, first = round_up(offset), last = round_down(end);
  if (last <= first || refused_) {
    write_buffered(offset, bytes, size);
    return;
  }
  write_buffered(offset, bytes, first - offset);
  std::uint64_t at = first;
  while (at < last) {
    const std::uint64_t n = std::min(staging_bytes, last - at);
    std::memcpy(staging_.get(), bytes + (at - offset), n);
    std::uint64_t written = 0;
    const int error = write_all(direct_fd_, staging_.get(), n, at, written);
    if (error != 0 && error != EINVAL) fail("write", at, n, error);
    refused_ = error == EINVAL; // the file system took O_DIRECT at open but not for transfers
    direct_bytes_ += written;
    at += written;
    if (written < n) break; // refused, or cut short off a block: the rest goes buffered
  }
  write_buffered(at, bytes + (at - offset), end - at);
}

void DirectFile::read(std::uint64_t offset, void* data, std::uint64_t size) {
  auto* out = static_cast<unsigned char*>(data);
  const std::uint64_t end = offset + size;
  for (std::uint64_t at = round_down(offset); at < end;) {
    const std::uint64_t n = std::min(staging_bytes, round_up(end) - at);
    std::uint64_t got = 0;
    int error = refused_ ? EINVAL : read_all(direct_fd_, staging_.get(), n, at, got);
    if (error == EINVAL) { // the file system took O_DIRECT at open but not for transfers
      refused_ = true;
      error = read_all(buffered_fd_, staging_.get(), n, at, got);
    } else {
      direct_bytes_ += got;
    }
    if (error != 0) fail("read", at, n, error);
    const std::uint64_t from = std::max(at, offset), to = std::min(at + n, end);
    if (at + got < to) {
      throw Error(fmt::format("cannot read {} bytes at byte {} of '{}': the file ends at byte {}; "
                              "it is cut short",
                              size, offset, path_, at + got));
    }
    std::memcpy(out + (from - offset), staging_.get() + (from - at), to - from);
    at += n;
  }
}

void DirectFile::sync() {
  if (mode_ == Mode::write && ::fdatasync(buffered_fd_) != 0) fail("flush", 0, 0, errno);
}

} // namespace gridlm::io
