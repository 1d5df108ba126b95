// Collective parallel-HDF5 files over MPI-IO, and 1-D float datasets that each rank writes and
// reads by hyperslab: the building block of sharded checkpoints and token datasets, where a
// tensor is stored at its global shape whatever the layout that wrote it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "io/h5_handle.hpp"
#include "parallel/span.hpp"

namespace gridlm::io {

// Silences HDF5's automatic error printing; GRIDLM_H5_CHECK reports errors instead. Idempotent.
void quiet_hdf5_errors();

class ParallelFile {
public:
  // Collective over `comm`. create() truncates; open_read() fails with a clear error naming the
  // path when it is missing or not HDF5.
  static ParallelFile create(MPI_Comm comm, const std::string& path);
  static ParallelFile open_read(MPI_Comm comm, const std::string& path);

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }

  // Collective: writes `local` at [offset, offset + local.size()) of a dataset of `global_size`
  // floats named `name` (created here).
  void write_floats(const std::string& name, std::uint64_t global_size, std::uint64_t offset,
                    Span<const float> local);
  // Collective: reads [offset, offset + out.size()) of dataset `name`. Checks the range.
  void read_floats(const std::string& name, std::uint64_t offset, Span<float> out);
  // Number of elements of 1-D dataset `name`.
  std::uint64_t dataset_size(const std::string& name);

  // Closes the file collectively (also done by the destructor).
  void close() { file_.reset(); }

private:
  ParallelFile(std::string path, H5Handle file) : path_(std::move(path)), file_(std::move(file)) {}
  std::string path_;
  H5Handle file_;
};

} // namespace gridlm::io
