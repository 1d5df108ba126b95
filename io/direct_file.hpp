// Contiguous byte runs of a file written and read with O_DIRECT: between the process's memory and
// the disk through one aligned staging buffer, without the page cache. On the development VM a
// buffered write of 1.5 GB runs at half the rate of a direct one and a buffered read at a third
// (allocating page-cache pages is what costs; docs/performance.md), and on a cluster a checkpoint
// of hundreds of GB only evicts what the job needs from the page cache. Checkpoint shards go
// this way when they are contiguous runs of the file (ParallelFile::write_shard, read_shard).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gridlm::io {

// The directory `dir`'s entries reach the storage (fsync of the directory), so that a rename
// into it survives a crash of the node. Some file systems cannot sync a directory: the rename
// stands either way, so nothing is reported.
void sync_directory(const std::string& dir);

// A run of `count` elements that starts at flat (row-major) index `first` of an array.
struct FlatRun {
  std::uint64_t first = 0, count = 0;
};

// The box [start, start + count) of an array of `shape` as one flat run, when its elements are
// contiguous in row-major order (every dimension after the first one of more than one element
// is whole); nothing otherwise (a column slice of a matrix).
std::optional<FlatRun> contiguous_run(const std::vector<std::uint64_t>& start,
                                      const std::vector<std::uint64_t>& count,
                                      const std::vector<std::uint64_t>& shape);

class DirectFile {
public:
  // The unit of direct transfers. O_DIRECT needs file offsets, sizes and memory aligned to the
  // device's logical block (512 or 4096 bytes); and a block must not share a page-cache page
  // with a neighbour's partial block written through the cache, so it is at least a page (64 KiB
  // on some arm64 and ppc64le kernels).
  static std::uint64_t block();
  // The staging buffer, the one copy of data a rank makes to write or read its shard directly
  // (a multiple of any block).
  static constexpr std::uint64_t staging_bytes = std::uint64_t(8) << 20;

  enum class Mode { write, read };
  // Opens the existing file `path` for direct transfers, and a second descriptor through the
  // page cache for partial blocks and for file systems that take O_DIRECT at open but refuse
  // the transfers. Returns nothing when either cannot be opened (a file system without
  // O_DIRECT, a missing file): the caller then goes through MPI-IO, which reports what is
  // wrong with the file where it reports it for every other transfer.
  static std::unique_ptr<DirectFile> open(const std::string& path, Mode mode);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  // Writes `size` bytes of `data` at `offset`. The whole blocks inside the run go direct; the
  // partial blocks at either end go through the page cache, because another writer may own the
  // rest of such a block, and two direct writes of one block would each overwrite the other's
  // part. Throws gridlm::Error naming the file and the system's reason (a full disk).
  void write(std::uint64_t offset, const void* data, std::uint64_t size);
  // Reads `size` bytes at `offset` into `data`, reading the whole blocks around them direct.
  // Throws gridlm::Error when the file ends before them.
  void read(std::uint64_t offset, void* data, std::uint64_t size);
  // What was written reaches the storage (fdatasync).
  void sync();

  // Bytes that went direct, not through the page cache (for reads, the whole blocks around the
  // runs asked for).
  std::uint64_t direct_bytes() const { return direct_bytes_; }

private:
  DirectFile(std::string path, Mode mode, int direct_fd, int buffered_fd, unsigned char* staging);
  void write_buffered(std::uint64_t offset, const unsigned char* data, std::uint64_t size);
  [[noreturn]] void fail(const char* what, std::uint64_t offset, std::uint64_t size, int error);

  std::string path_;
  Mode mode_;
  int direct_fd_ = -1;
  int buffered_fd_ = -1;
  bool refused_ = false; // a direct transfer failed with EINVAL: the rest go through the cache
  struct Free {
    void operator()(unsigned char* p) const;
  };
  std::unique_ptr<unsigned char, Free> staging_; // staging_bytes, aligned to block()
  std::uint64_t direct_bytes_ = 0;
};

} // namespace gridlm::io
