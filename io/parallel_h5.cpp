// Parallel HDF5 files opened with the MPI-IO driver, typed 1-D hyperslab I/O and attributes.
#include "io/parallel_h5.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "io/h5_check.hpp"
#include "io/write_errors.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::io {
namespace {

// Memory type and the little-endian file type of each element type ParallelFile stores.
template <class T>
struct H5Types;
template <>
struct H5Types<float> {
  static hid_t memory() { return H5T_NATIVE_FLOAT; }
  static hid_t file() { return H5T_IEEE_F32LE; }
};
template <>
struct H5Types<std::int32_t> {
  static hid_t memory() { return H5T_NATIVE_INT32; }
  static hid_t file() { return H5T_STD_I32LE; }
};
template <>
struct H5Types<std::uint8_t> {
  static hid_t memory() { return H5T_NATIVE_UINT8; }
  static hid_t file() { return H5T_STD_U8LE; }
};
template <>
struct H5Types<std::uint16_t> {
  static hid_t memory() { return H5T_NATIVE_UINT16; }
  static hid_t file() { return H5T_STD_U16LE; }
};
template <>
struct H5Types<std::uint32_t> {
  static hid_t memory() { return H5T_NATIVE_UINT32; }
  static hid_t file() { return H5T_STD_U32LE; }
};
template <>
struct H5Types<std::uint64_t> {
  static hid_t memory() { return H5T_NATIVE_UINT64; }
  static hid_t file() { return H5T_STD_U64LE; }
};

H5Handle mpio_access(MPI_Comm comm) {
  H5Handle fapl(GRIDLM_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  // No data sieving for writes (ROMIO): a sieved write reads the span around a rank's pieces and
  // writes it back, which would put back stale bytes of another rank's direct run (DirectFile)
  // written in between. Every piece goes as its own write instead.
  MPI_Info info = MPI_INFO_NULL;
  GRIDLM_MPI_CHECK(MPI_Info_create(&info));
  GRIDLM_MPI_CHECK(MPI_Info_set(info, "romio_ds_write", "disable"));
  const herr_t set = H5Pset_fapl_mpio(fapl.get(), comm, info); // HDF5 keeps a copy
  GRIDLM_MPI_CHECK(MPI_Info_free(&info));
  GRIDLM_H5_CHECK(set);
  return fapl;
}

H5Handle transfer_list(Transfer transfer) {
  H5Handle dxpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_DATASET_XFER)));
  GRIDLM_H5_CHECK(H5Pset_dxpl_mpio(
      dxpl.get(), transfer == Transfer::collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));
  return dxpl;
}

// A 1-D selection of `count` elements at `offset` in `space` (none when count is 0).
void select_range(hid_t space, std::uint64_t offset, std::uint64_t count) {
  if (count == 0) {
    GRIDLM_H5_CHECK(H5Sselect_none(space));
    return;
  }
  const hsize_t start = offset, n = count;
  GRIDLM_H5_CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &n, nullptr));
}

H5Handle scalar_attribute(hid_t file, const std::string& object, const std::string& name,
                          hid_t type) {
  H5Handle space(GRIDLM_H5_CHECK(H5Screate(H5S_SCALAR)));
  return H5Handle(
      GRIDLM_H5_CHECK(H5Acreate_by_name(file, object.c_str(), name.c_str(), type, space.get(),
                                        H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

} // namespace

ParallelFile ParallelFile::create(MPI_Comm comm, const std::string& path) {
  detail::quiet_hdf5_errors();
  auto members = std::make_shared<const std::vector<int>>(parallel::world_ranks(comm));
  hid_t id = H5I_INVALID_HID;
  {
    // From the access list on: H5Pset_fapl_mpio duplicates the communicator, a collective call.
    const parallel::flight::BlockingScope waited("hdf5 create", parallel::flight::label(path), 0,
                                                 members);
    H5Handle fapl = mpio_access(comm);
    // Large datasets start on MiB boundaries, as parallel file systems stripe them: each rank's
    // writes then begin on a stripe of their own.
    GRIDLM_H5_CHECK(H5Pset_alignment(fapl.get(), 1u << 20, 1u << 20));
    id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  }
  try {
    parallel::agree_on_errors(
        comm, id >= 0 ? ""
                      : fmt::format("cannot create HDF5 file '{}': check that its directory "
                                    "exists and is writable by every rank",
                                    path));
  } catch (const CollectiveError&) {
    // Ranks that could create it did: the file is not left behind (empty). Not closed here: the
    // close is collective, and the ranks that failed have no file to close.
    std::error_code ec;
    if (parallel::comm_rank(comm) == 0) std::filesystem::remove(path, ec);
    throw;
  }
  ParallelFile f(path, H5Handle(id), true, std::move(members));
  f.mpi_file_ = end_job_on_write_errors(id, path);
  return f;
}

ParallelFile ParallelFile::open_read(MPI_Comm comm, const std::string& path) {
  detail::quiet_hdf5_errors();
  // Checked on every rank and agreed before the collective open: a file one node cannot see
  // must not leave the other ranks waiting inside MPI-IO.
  parallel::run_agreed(comm, [&] {
    const std::string problem = hdf5_file_problem(path);
    if (!problem.empty()) throw Error(fmt::format("cannot open '{}': it {}", path, problem));
  });
  auto members = std::make_shared<const std::vector<int>>(parallel::world_ranks(comm));
  hid_t id = H5I_INVALID_HID;
  std::string damaged;
  {
    const parallel::flight::BlockingScope waited("hdf5 open", parallel::flight::label(path), 0,
                                                 members);
    H5Handle fapl = mpio_access(comm);
    id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
    // Now, while HDF5's error stack still holds the reason: closing `fapl` clears it.
    if (id < 0) damaged = damaged_hdf5_message(path);
  }
  parallel::agree_on_errors(comm, damaged);
  return ParallelFile(path, H5Handle(id), false, std::move(members));
}

template <class T>
void ParallelFile::write(const std::string& name, std::uint64_t global_size, std::uint64_t offset,
                         Span<const T> local, std::uint64_t chunk) {
  if (offset + local.size() > global_size) {
    throw Error(fmt::format("write of '{}' in '{}': range [{}, {}) is outside its {} elements; "
                            "on {}",
                            name, path_, offset, offset + local.size(), global_size, where()));
  }
  const hsize_t dims = global_size, unlimited = H5S_UNLIMITED;
  H5Handle file_space(
      GRIDLM_H5_CHECK(H5Screate_simple(1, &dims, chunk > 0 ? &unlimited : nullptr)));
  H5Handle dcpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  if (chunk > 0) {
    const hsize_t c = chunk;
    GRIDLM_H5_CHECK(H5Pset_chunk(dcpl.get(), 1, &c));
  }
  // Every element is written: filling first would write the whole dataset twice.
  GRIDLM_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
  H5Handle lcpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_LINK_CREATE)));
  GRIDLM_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  H5Handle dset;
  {
    const parallel::flight::BlockingScope waited = collective("hdf5 create dataset", 0);
    dset = H5Handle(
        GRIDLM_H5_CHECK(H5Dcreate2(file_.get(), name.c_str(), H5Types<T>::file(), file_space.get(),
                                   lcpl.get(), dcpl.get(), H5P_DEFAULT)));
  }
  select_range(file_space.get(), offset, local.size());
  const hsize_t n = local.size();
  H5Handle mem_space(GRIDLM_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  if (n == 0) GRIDLM_H5_CHECK(H5Sselect_none(mem_space.get()));
  // Independent: a collective transfer that fails on one rank (a full disk) returns there before
  // HDF5's own collectives inside it, which the other ranks then wait in for ever. The ranks'
  // ranges are disjoint and contiguous, so a collective transfer would gain little.
  const Transfer transfer = Transfer::independent;
  const parallel::flight::BlockingScope waited = moving(transfer, true, n * sizeof(T));
  H5Handle dxpl = transfer_list(transfer);
  GRIDLM_H5_CHECK(H5Dwrite(dset.get(), H5Types<T>::memory(), mem_space.get(), file_space.get(),
                           dxpl.get(), local.data()));
}

std::uint64_t ParallelFile::dataset_size(const std::string& name) const {
  if (H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0) {
    throw Error(fmt::format("'{}' has no dataset '{}'; on {}", path_, name, where()));
  }
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  H5Handle space(GRIDLM_H5_CHECK(H5Dget_space(dset.get())));
  if (GRIDLM_H5_CHECK(H5Sget_simple_extent_ndims(space.get())) != 1) {
    throw Error(fmt::format("dataset '{}' in '{}' is not 1-D; on {}", name, path_, where()));
  }
  hsize_t dims = 0;
  GRIDLM_H5_CHECK(H5Sget_simple_extent_dims(space.get(), &dims, nullptr));
  return dims;
}

template <class T>
void ParallelFile::read(const std::string& name, std::uint64_t offset, Span<T> out,
                        Transfer transfer) const {
  const std::uint64_t size = dataset_size(name);
  if (offset + out.size() > size) {
    throw Error(fmt::format("read of '{}' in '{}': range [{}, {}) is outside its {} elements; "
                            "on {}",
                            name, path_, offset, offset + out.size(), size, where()));
  }
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  H5Handle file_space(GRIDLM_H5_CHECK(H5Dget_space(dset.get())));
  select_range(file_space.get(), offset, out.size());
  const hsize_t n = out.size();
  H5Handle mem_space(GRIDLM_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  if (n == 0) GRIDLM_H5_CHECK(H5Sselect_none(mem_space.get()));
  H5Handle dxpl = transfer_list(transfer);
  const parallel::flight::BlockingScope waited = moving(transfer, false, out.size() * sizeof(T));
  GRIDLM_H5_CHECK(H5Dread(dset.get(), H5Types<T>::memory(), mem_space.get(), file_space.get(),
                          dxpl.get(), out.data()));
}

void ParallelFile::write_attribute(const std::string& object, const std::string& name,
                                   std::int64_t value) {
  const parallel::flight::BlockingScope waited = collective("hdf5 write attribute", sizeof value);
  H5Handle attr = scalar_attribute(file_.get(), object, name, H5T_STD_I64LE);
  GRIDLM_H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value));
}

void ParallelFile::write_attribute(const std::string& object, const std::string& name,
                                   double value) {
  const parallel::flight::BlockingScope waited = collective("hdf5 write attribute", sizeof value);
  H5Handle attr = scalar_attribute(file_.get(), object, name, H5T_IEEE_F64LE);
  GRIDLM_H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value));
}

void ParallelFile::write_attribute(const std::string& object, const std::string& name,
                                   const std::string& value) {
  H5Handle type(GRIDLM_H5_CHECK(H5Tcopy(H5T_C_S1)));
  GRIDLM_H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE));
  GRIDLM_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  const parallel::flight::BlockingScope waited = collective("hdf5 write attribute", value.size());
  H5Handle attr = scalar_attribute(file_.get(), object, name, type.get());
  const char* text = value.c_str();
  GRIDLM_H5_CHECK(H5Awrite(attr.get(), type.get(), &text));
}

namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return "[" + s + "]";
}

// Boxes inside `shape`, stacked by rows; returns the elements they hold.
std::uint64_t check_boxes(const std::vector<Box>& boxes, const std::vector<std::uint64_t>& shape,
                          const std::string& what) {
  std::uint64_t n = 0, next_row = 0;
  for (const Box& b : boxes) {
    if (b.start.size() != shape.size() || b.count.size() != shape.size()) {
      throw Error(fmt::format("{}: a box of {} dimensions in an array of {}", what, b.start.size(),
                              shape.size()));
    }
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (b.start[d] + b.count[d] > shape[d]) {
        throw Error(fmt::format("{}: a box reaches {} in dimension {} of {}", what,
                                b.start[d] + b.count[d], d, shape_text(shape)));
      }
    }
    if (!shape.empty() && b.start[0] < next_row) {
      throw Error(fmt::format("{}: boxes must be stacked by rows, in order", what));
    }
    if (!shape.empty()) next_row = b.start[0] + b.count[0];
    n += elements(b.count);
  }
  return n;
}

// The dataspace of `shape` with the boxes selected (none when there are none; an array of no
// elements, a rank's memory when it holds nothing, as a one-element space with nothing in it).
H5Handle selection(const std::vector<std::uint64_t>& shape, const std::vector<Box>& boxes) {
  if (!shape.empty() && elements(shape) == 0) {
    const hsize_t one = 1;
    H5Handle none(GRIDLM_H5_CHECK(H5Screate_simple(1, &one, nullptr)));
    GRIDLM_H5_CHECK(H5Sselect_none(none.get()));
    return none;
  }
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5Handle space(GRIDLM_H5_CHECK(dims.empty()
                                     ? H5Screate(H5S_SCALAR)
                                     : H5Screate_simple(int(dims.size()), dims.data(), nullptr)));
  if (boxes.empty()) {
    GRIDLM_H5_CHECK(H5Sselect_none(space.get()));
    return space;
  }
  if (dims.empty()) return space; // a scalar: the one box is the element
  bool first = true;
  for (const Box& b : boxes) {
    if (elements(b.count) == 0) continue;
    const std::vector<hsize_t> start(b.start.begin(), b.start.end()),
        count(b.count.begin(), b.count.end());
    GRIDLM_H5_CHECK(H5Sselect_hyperslab(space.get(), first ? H5S_SELECT_SET : H5S_SELECT_OR,
                                        start.data(), nullptr, count.data(), nullptr));
    first = false;
  }
  if (first) GRIDLM_H5_CHECK(H5Sselect_none(space.get()));
  return space;
}

void check_shard(const TensorShard& s, std::size_t local_size, const std::string& what) {
  if (elements(s.local_shape) != local_size) {
    throw Error(fmt::format("{}: {} elements in memory for a shard of shape {}", what, local_size,
                            shape_text(s.local_shape)));
  }
  if (s.file.size() != s.memory.size()) {
    throw Error(
        fmt::format("{}: {} file boxes but {} memory boxes", what, s.file.size(), s.memory.size()));
  }
  for (std::size_t i = 0; i < s.file.size(); ++i) {
    if (s.file[i].count != s.memory[i].count) {
      throw Error(fmt::format("{}: box {} has another size in memory than in the file", what, i));
    }
  }
  check_boxes(s.file, s.global_shape, what + " (file)");
  check_boxes(s.memory, s.local_shape, what + " (memory)");
}

// A shard's boxes by the way they travel: contiguous runs of at least direct_min_bytes in both
// the file and memory go direct, the rest through HDF5 (MPI-IO).
struct DirectRun {
  std::uint64_t file_byte = 0;      // in the file
  std::uint64_t memory_element = 0; // in the rank's array
  std::uint64_t count = 0;          // elements
};
struct Split {
  std::vector<DirectRun> direct;
  std::vector<Box> file, memory; // what HDF5 moves
};
Split split_boxes(const TensorShard& s, bool direct, std::uint64_t dataset_byte) {
  Split out;
  for (std::size_t i = 0; i < s.file.size(); ++i) {
    const std::optional<FlatRun> f =
        contiguous_run(s.file[i].start, s.file[i].count, s.global_shape);
    const std::optional<FlatRun> m =
        contiguous_run(s.memory[i].start, s.memory[i].count, s.local_shape);
    if (direct && f && m && f->count * sizeof(float) >= ParallelFile::direct_min_bytes) {
      out.direct.push_back({dataset_byte + f->first * sizeof(float), m->first, f->count});
    } else {
      out.file.push_back(s.file[i]);
      out.memory.push_back(s.memory[i]);
    }
  }
  return out;
}

// Direct transfers store the bytes as they are in memory: the file's little-endian floats.
constexpr bool little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

} // namespace

void ParallelFile::write_shard(const std::string& name, const TensorShard& shard,
                               Span<const float> local, Transfer transfer) {
  check_shard(shard, local.size(),
              fmt::format("write of '{}' in '{}' on {}", name, path_, where()));
  H5Handle file_space = selection(shard.global_shape, shard.file);
  H5Handle dcpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  GRIDLM_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER)); // the writers cover it
  // Allocated now, so that its place in the file is known to direct writes.
  GRIDLM_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  H5Handle lcpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_LINK_CREATE)));
  GRIDLM_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  H5Handle dset;
  {
    const parallel::flight::BlockingScope waited = collective("hdf5 create dataset", 0);
    dset = H5Handle(
        GRIDLM_H5_CHECK(H5Dcreate2(file_.get(), name.c_str(), H5Types<float>::file(),
                                   file_space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT)));
  }
  const haddr_t at = H5Dget_offset(dset.get());
  const bool direct_ok =
      transfer == Transfer::independent && at != HADDR_UNDEF && direct() != nullptr;
  const Split split = split_boxes(shard, direct_ok, at);
  H5Handle mem_space = selection(shard.local_shape, split.memory);
  file_space = selection(shard.global_shape, split.file);
  H5Handle dxpl = transfer_list(transfer);
  const parallel::flight::BlockingScope waited =
      moving(transfer, true, local.size() * sizeof(float));
  GRIDLM_H5_CHECK(H5Dwrite(dset.get(), H5Types<float>::memory(), mem_space.get(), file_space.get(),
                           dxpl.get(), local.data()));
  for (const DirectRun& run : split.direct)
    direct_->write(run.file_byte, local.data() + run.memory_element, run.count * sizeof(float));
}

std::vector<std::uint64_t> ParallelFile::shape(const std::string& name) const {
  if (H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0) {
    throw Error(fmt::format("'{}' has no dataset '{}'; on {}", path_, name, where()));
  }
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  H5Handle space(GRIDLM_H5_CHECK(H5Dget_space(dset.get())));
  const int n = GRIDLM_H5_CHECK(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(n));
  GRIDLM_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return std::vector<std::uint64_t>(dims.begin(), dims.end());
}

std::vector<std::pair<std::uint64_t, std::uint64_t>>
ParallelFile::byte_ranges(const std::vector<std::string>& names) const {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const std::string& name : names) {
    if (H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0) continue;
    H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
    const haddr_t offset = H5Dget_offset(dset.get()); // HADDR_UNDEF unless contiguous, written
    const hsize_t size = H5Dget_storage_size(dset.get());
    if (offset != HADDR_UNDEF && size > 0) ranges.emplace_back(offset, size);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
  for (const auto& [offset, size] : ranges) {
    if (!merged.empty() && offset <= merged.back().first + merged.back().second) {
      merged.back().second = std::max(merged.back().second, offset + size - merged.back().first);
    } else {
      merged.emplace_back(offset, size);
    }
  }
  return merged;
}

void ParallelFile::prefetch(const std::vector<std::string>& names) const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return; // a hint only: the reads themselves report what is wrong
  for (const auto& [offset, size] : byte_ranges(names))
    posix_fadvise(fd, off_t(offset), off_t(size), POSIX_FADV_WILLNEED);
  ::close(fd);
}

void ParallelFile::prefetch(const std::vector<std::pair<std::string, TensorShard>>& reads) const {
  std::vector<std::string> cached;
  for (const auto& [name, shard] : reads) {
    if (!reads_directly(shard)) cached.push_back(name);
  }
  prefetch(cached);
}

bool ParallelFile::reads_directly(const TensorShard& shard) const {
  return direct() != nullptr && split_boxes(shard, true, 0).file.empty();
}

DirectFile* ParallelFile::direct() const {
  if (!direct_io_ || !little_endian) return nullptr;
  if (!direct_opened_) {
    direct_opened_ = true;
    direct_ = DirectFile::open(path_, writable_ ? DirectFile::Mode::write : DirectFile::Mode::read);
  }
  return direct_.get();
}

void ParallelFile::read_shard(const std::string& name, const TensorShard& shard, Span<float> local,
                              Transfer transfer) const {
  check_shard(shard, local.size(), fmt::format("read of '{}' in '{}' on {}", name, path_, where()));
  const std::vector<std::uint64_t> stored = shape(name);
  if (stored != shard.global_shape) {
    throw Error(fmt::format("'{}': dataset '{}' has shape {}, where {} is needed; the file was "
                            "written for another model",
                            path_, name, shape_text(stored), shape_text(shard.global_shape)));
  }
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  // A contiguous float32 dataset (chunked ones and other types go through HDF5 whole).
  H5Handle type(GRIDLM_H5_CHECK(H5Dget_type(dset.get())));
  const haddr_t at = H5Dget_offset(dset.get());
  const bool plain = at != HADDR_UNDEF && H5Tequal(type.get(), H5Types<float>::file()) > 0;
  const Split split =
      split_boxes(shard, transfer == Transfer::independent && plain && direct() != nullptr, at);
  H5Handle file_space = selection(shard.global_shape, split.file);
  H5Handle mem_space = selection(shard.local_shape, split.memory);
  H5Handle dxpl = transfer_list(transfer);
  const parallel::flight::BlockingScope waited =
      moving(transfer, false, local.size() * sizeof(float));
  GRIDLM_H5_CHECK(H5Dread(dset.get(), H5Types<float>::memory(), mem_space.get(), file_space.get(),
                          dxpl.get(), local.data()));
  for (const DirectRun& run : split.direct)
    direct_->read(run.file_byte, local.data() + run.memory_element, run.count * sizeof(float));
}

void ParallelFile::flush() {
  // HDF5's flush is collective: a rank whose own sync failed still takes part, then reports.
  std::string failed;
  try {
    const parallel::flight::BlockingScope waited = independent("fsync", 0);
    if (direct_) direct_->sync();
  } catch (const Error& e) {
    failed = e.what();
  }
  {
    const parallel::flight::BlockingScope waited = collective("hdf5 flush", 0);
    if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) end_job_inside_collective("flush");
  }
  if (!failed.empty()) throw Error(failed);
}

void ParallelFile::close() {
  direct_.reset();
  if (!file_) return;
  const parallel::flight::BlockingScope waited = collective("hdf5 close", 0);
  // A written file's close is checked (the last reference closes it; a copy of the identifier
  // may be held elsewhere). After a close, reset() only forgets the identifier.
  if (writable_ && H5Iget_ref(file_.get()) == 1 && H5Fclose(file_.get()) < 0) {
    end_job_inside_collective("close");
  }
  file_.reset();
  forget_write_errors(std::exchange(mpi_file_, MPI_FILE_NULL));
}

void ParallelFile::end_job_inside_collective(const char* what) const {
  // HDF5 writes a file's metadata from several ranks inside its flush and close, between
  // collectives of its own: a rank whose write failed returns before them, and the others wait
  // there for ever (the watchdog would name a hang, not the cause). So this rank ends the job.
  const std::string reason = detail::h5_error_detail();
  end_job_on_write_error(path_, what, reason.empty() ? "HDF5 reports an error" : reason);
}

bool ParallelFile::has_object(const std::string& name) const {
  return H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) > 0;
}

bool ParallelFile::has_attribute(const std::string& object, const std::string& name) const {
  return H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

double ParallelFile::number_attribute(const std::string& object, const std::string& name) const {
  if (!has_attribute(object, name)) {
    throw Error(fmt::format("'{}': '{}' has no attribute '{}'", path_, object, name));
  }
  H5Handle attr(GRIDLM_H5_CHECK(
      H5Aopen_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT)));
  H5Handle type(GRIDLM_H5_CHECK(H5Aget_type(attr.get())));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    throw Error(fmt::format("'{}': attribute '{}' of '{}' is not a number", path_, name, object));
  }
  double value = 0.0;
  GRIDLM_H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value));
  return value;
}

std::string ParallelFile::text_attribute(const std::string& object, const std::string& name) const {
  if (!has_attribute(object, name)) {
    throw Error(fmt::format("'{}': '{}' has no attribute '{}'", path_, object, name));
  }
  H5Handle attr(GRIDLM_H5_CHECK(
      H5Aopen_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT)));
  H5Handle type(GRIDLM_H5_CHECK(H5Aget_type(attr.get())));
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) <= 0) {
    throw Error(fmt::format("'{}': attribute '{}' of '{}' is not a text", path_, name, object));
  }
  H5Handle memory(GRIDLM_H5_CHECK(H5Tcopy(H5T_C_S1)));
  GRIDLM_H5_CHECK(H5Tset_size(memory.get(), H5T_VARIABLE));
  GRIDLM_H5_CHECK(H5Tset_cset(memory.get(), H5Tget_cset(type.get()))); // no conversion
  char* text = nullptr;
  GRIDLM_H5_CHECK(H5Aread(attr.get(), memory.get(), &text));
  std::string value = text != nullptr ? text : "";
  H5free_memory(text);
  return value;
}

#define GRIDLM_PARALLEL_FILE_TYPES(T)                                                              \
  template void ParallelFile::write<T>(const std::string&, std::uint64_t, std::uint64_t,           \
                                       Span<const T>, std::uint64_t);                              \
  template void ParallelFile::read<T>(const std::string&, std::uint64_t, Span<T>, Transfer) const;
GRIDLM_PARALLEL_FILE_TYPES(float)
GRIDLM_PARALLEL_FILE_TYPES(std::int32_t)
GRIDLM_PARALLEL_FILE_TYPES(std::uint8_t)
GRIDLM_PARALLEL_FILE_TYPES(std::uint16_t)
GRIDLM_PARALLEL_FILE_TYPES(std::uint32_t)
GRIDLM_PARALLEL_FILE_TYPES(std::uint64_t)
#undef GRIDLM_PARALLEL_FILE_TYPES

} // namespace gridlm::io
