// Collective parallel-HDF5 files over MPI-IO, and 1-D datasets that each rank writes and reads by
// hyperslab: what token datasets are made of, a token stream stored at its global size whatever
// the partition of ranks that wrote it, and readable by any other partition.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/direct_file.hpp"
#include "io/h5_file_problem.hpp"
#include "io/h5_handle.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/span.hpp"

namespace gridlm::io {

// Whether a transfer is one collective operation (every rank of the file's communicator calls
// it, each with its own range, possibly empty) or each rank's own.
enum class Transfer { collective, independent };

// Where part `part` of `parts` near-equal parts of [0, n) begins: floor(n * part / parts),
// without overflow.
inline std::uint64_t part_begin(std::uint64_t n, int part, int parts) {
  const std::uint64_t p = std::uint64_t(part), q = std::uint64_t(parts);
  return n / q * p + n % q * p / q;
}

// A rank's shard of an N-D tensor stored at its global shape: boxes of the global array, the
// i-th file box held in the rank's memory (an array of local_shape) as the i-th memory box.
// Boxes of one list are stacked along dimension 0 (disjoint row ranges, in increasing order),
// so that both hold their elements in the same row-major order; a shard of no boxes takes part
// in a collective transfer with nothing (a replica that leaves the writing to another).
struct Box {
  std::vector<std::uint64_t> start, count; // per dimension
};
struct TensorShard {
  std::vector<std::uint64_t> global_shape; // the dataset's
  std::vector<std::uint64_t> local_shape;  // the rank's memory's
  std::vector<Box> file;                   // in global coordinates
  std::vector<Box> memory;                 // the same elements, in local coordinates
};

// The number of elements of an array of `shape` (1 for a scalar's empty shape).
std::uint64_t elements(const std::vector<std::uint64_t>& shape);

// An order-free checksum of a shard's elements: the sum over them of a hash of (global flat
// index, value bits), modulo 2^64. Summed over ranks whose shards partition a tensor, it is the
// tensor's checksum whatever the partition, so any layout can verify a file any other wrote.
std::uint64_t shard_checksum(const TensorShard& shard, Span<const float> local);

class ParallelFile {
public:
  // Collective over `comm`. create() truncates; open_read() fails with a clear error naming the
  // path when it is missing, not HDF5 or damaged. Both agree on failure across the ranks, so an
  // error (even one rank's) is a CollectiveError on every rank rather than a hang in MPI-IO.
  static ParallelFile create(MPI_Comm comm, const std::string& path);
  static ParallelFile open_read(MPI_Comm comm, const std::string& path);

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }

  // Collective: writes `local` at [offset, offset + local.size()) of a 1-D dataset of
  // `global_size` elements named `name` (created here, with missing groups). T is float, int32,
  // uint8, uint16, uint32 or uint64, stored little-endian at its own width. `chunk` > 0 stores
  // the dataset in chunks of that many elements (extendible, so a shard can grow later). The
  // dataset's creation is collective, each rank's transfer independent (a failed one leaves no
  // rank waiting inside HDF5).
  template <class T>
  void write(const std::string& name, std::uint64_t global_size, std::uint64_t offset,
             Span<const T> local, std::uint64_t chunk = 0);
  // Reads [offset, offset + out.size()) of 1-D dataset `name`, converting to T. Checks the
  // range.
  template <class T>
  void read(const std::string& name, std::uint64_t offset, Span<T> out,
            Transfer transfer = Transfer::collective) const;

  void write_floats(const std::string& name, std::uint64_t global_size, std::uint64_t offset,
                    Span<const float> local) {
    write(name, global_size, offset, local);
  }
  void read_floats(const std::string& name, std::uint64_t offset, Span<float> out) const {
    read(name, offset, out);
  }
  // Collective: creates float32 dataset `name` at shard.global_shape (with missing groups),
  // every rank writing its boxes from `local` (the elements of shard.local_shape). Throws
  // gridlm::Error for boxes outside the shapes, of unequal counts or not stacked by rows. The
  // data goes independently by default: shards are disjoint runs, and MPI-IO's collective
  // buffering made a checkpoint of a few hundred small tensors 100 times slower here
  // (docs/performance.md). With direct I/O on (the default), a box of at least
  // direct_min_bytes that is one contiguous run of the file goes by DirectFile, not MPI-IO.
  void write_shard(const std::string& name, const TensorShard& shard, Span<const float> local,
                   Transfer transfer = Transfer::independent);
  // Reads this rank's boxes of dataset `name` into `local`, whose other elements it leaves as
  // they are. Throws gridlm::Error naming the file and dataset when the dataset is missing or
  // its shape is not shard.global_shape. Boxes go direct as write_shard's do.
  void read_shard(const std::string& name, const TensorShard& shard, Span<float> local,
                  Transfer transfer = Transfer::collective) const;
  // Shape of dataset `name` (throws naming it when it is missing).
  std::vector<std::uint64_t> shape(const std::string& name) const;
  // The byte ranges [offset, offset + size) that datasets `names` occupy in the file, sorted and
  // merged where they touch; datasets that are missing, chunked or not yet written are left out.
  std::vector<std::pair<std::uint64_t, std::uint64_t>>
  byte_ranges(const std::vector<std::string>& names) const;
  // Not collective, a hint: asks the kernel to start reading datasets `names` into the page
  // cache now (posix_fadvise WILLNEED over their byte ranges), so that the reads that follow
  // find their data in memory or in flight. One read per tensor waits for the disk at a queue
  // depth of one; the hint lets the disk stream the whole shard while the reads and their
  // checksums go on.
  void prefetch(const std::vector<std::string>& names) const;
  // The same for independent read_shard calls about to be made, (dataset, shard) each: the
  // datasets whose shard goes direct are left out, since a direct read does not look in the
  // page cache the hint would fill (the disk would read them twice).
  void prefetch(const std::vector<std::pair<std::string, TensorShard>>& reads) const;

  // Whether independent write_shard and read_shard transfers move large contiguous boxes with
  // O_DIRECT (on by default; MPI-IO and the page cache serve the rest, and all of it on a file
  // system without O_DIRECT). Collective transfers never go direct: MPI-IO's aggregators read
  // and write back the gaps between the pieces they are given, which would be direct runs.
  void set_direct_io(bool on) { direct_io_ = on; }
  // The smallest box that goes direct: HDF5 aligns datasets of this size to 1 MiB (create()),
  // so that the first rank's run in one starts on a block; smaller ones are not worth a
  // transfer of their own.
  static constexpr std::uint64_t direct_min_bytes = std::uint64_t(1) << 20;
  // Whether an independent read_shard reads every box of `shard` direct.
  bool reads_directly(const TensorShard& shard) const;
  // Bytes this rank has moved with O_DIRECT through this file.
  std::uint64_t direct_bytes() const { return direct_ ? direct_->direct_bytes() : 0; }

  // Number of elements of 1-D dataset `name`.
  std::uint64_t dataset_size(const std::string& name) const;

  // Collective (every rank passes the same value): a scalar attribute of the object at
  // `object` ("/" for the file). Integers are stored as int64, text as a UTF-8 variable-length
  // string, which h5py reads as str.
  void write_attribute(const std::string& object, const std::string& name, std::int64_t value);
  void write_attribute(const std::string& object, const std::string& name, double value);
  void write_attribute(const std::string& object, const std::string& name,
                       const std::string& value);

  // Reads a scalar attribute of `object`: a number (integer or float) or a text. Throws
  // gridlm::Error naming the file, object and attribute when it is missing or of another kind.
  double number_attribute(const std::string& object, const std::string& name) const;
  std::string text_attribute(const std::string& object, const std::string& name) const;
  bool has_object(const std::string& name) const;
  // Whether `object` has an attribute `name` (one that later versions added, say).
  bool has_attribute(const std::string& object, const std::string& name) const;

  // Collective: everything written so far reaches the storage (MPI_File_sync underneath), so
  // that a rename after it publishes a file that survives a crash. HDF5's own flush failing on
  // a rank (a full disk) ends the job from that rank (abort_job): the others may be waiting
  // inside it, and the file's state now differs between the ranks.
  void flush();

  // Closes the file collectively (also done by the destructor); a written file's close failing
  // on a rank ends the job as flush() does.
  void close();
  ~ParallelFile() { close(); }
  ParallelFile(ParallelFile&&) noexcept = default;
  ParallelFile& operator=(ParallelFile&&) = delete;

private:
  using Members = std::shared_ptr<const std::vector<int>>;
  ParallelFile(std::string path, H5Handle file, bool writable, Members members)
      : path_(std::move(path)), file_(std::move(file)), writable_(writable),
        members_(std::move(members)), label_(parallel::flight::label(path_)) {}
  // The flight recorder's record of one HDF5 call that blocks this rank (parallel/watchdog.hpp):
  // a collective one names the file's ranks, so that a rank held up elsewhere is named as the one
  // the others wait for; an independent one (a transfer of this rank's own) names none. Without
  // them a job hung inside HDF5 (a stalled file system, metadata that differ between ranks) would
  // hang until the batch system's limit with nothing said.
  parallel::flight::BlockingScope collective(const char* op, std::uint64_t bytes) const {
    return parallel::flight::BlockingScope(op, label_, bytes, members_);
  }
  parallel::flight::BlockingScope independent(const char* op, std::uint64_t bytes) const {
    return parallel::flight::BlockingScope(op, label_, bytes);
  }
  // A data transfer's: collective or this rank's own, as `transfer` says.
  parallel::flight::BlockingScope moving(Transfer transfer, bool write, std::uint64_t bytes) const {
    if (transfer == Transfer::collective)
      return collective(write ? "hdf5 write" : "hdf5 read", bytes);
    return independent(write ? "hdf5 write (independent)" : "hdf5 read (independent)", bytes);
  }
  // Ends the job from this rank: HDF5's flush or close of the file (`what`) failed here, inside
  // collectives the other ranks may be waiting in.
  [[noreturn]] void end_job_inside_collective(const char* what) const;
  // The file opened for direct transfers, on first use; nothing when direct I/O is off or the
  // file system refuses it.
  DirectFile* direct() const;
  std::string path_;
  H5Handle file_;
  bool writable_ = false;
  MPI_File mpi_file_ = MPI_FILE_NULL; // a written file's, whose MPI-IO errors end the job
  bool direct_io_ = true;
  mutable bool direct_opened_ = false;
  mutable std::unique_ptr<DirectFile> direct_;
  Members members_;        // the world ranks of the file's communicator
  const char* label_ = ""; // the path, as the flight recorder keeps it
};

} // namespace gridlm::io
