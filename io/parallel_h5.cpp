// Parallel HDF5 files opened with the MPI-IO driver, collective hyperslab I/O.
#include "io/parallel_h5.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "io/h5_check.hpp"

namespace gridlm::io {
namespace {

H5Handle mpio_access(MPI_Comm comm) {
  H5Handle fapl(GRIDLM_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  GRIDLM_H5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL));
  return fapl;
}

H5Handle collective_transfer() {
  H5Handle dxpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_DATASET_XFER)));
  GRIDLM_H5_CHECK(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE));
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

// H5Fis_accessible replaced H5Fis_hdf5 in 1.12; Debian 12 ships 1.10.
htri_t is_hdf5(const std::string& path) {
#if H5_VERSION_GE(1, 12, 0)
  return H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
  return H5Fis_hdf5(path.c_str());
#endif
}

} // namespace

void quiet_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

ParallelFile ParallelFile::create(MPI_Comm comm, const std::string& path) {
  quiet_hdf5_errors();
  H5Handle fapl = mpio_access(comm);
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (id < 0) {
    throw Error(fmt::format("cannot create HDF5 file '{}': check that its directory exists and "
                            "is writable by every rank; on {}",
                            path, where()));
  }
  return ParallelFile(path, H5Handle(id));
}

ParallelFile ParallelFile::open_read(MPI_Comm comm, const std::string& path) {
  quiet_hdf5_errors();
  if (access(path.c_str(), R_OK) != 0) {
    throw Error(
        fmt::format("cannot read '{}': no such file, or no permission; on {}", path, where()));
  }
  if (is_hdf5(path) <= 0) {
    throw Error(fmt::format("'{}' is not an HDF5 file (or it is truncated); on {}", path, where()));
  }
  H5Handle fapl = mpio_access(comm);
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) {
    throw Error(
        fmt::format("cannot open HDF5 file '{}' for parallel reading; on {}", path, where()));
  }
  return ParallelFile(path, H5Handle(id));
}

void ParallelFile::write_floats(const std::string& name, std::uint64_t global_size,
                                std::uint64_t offset, Span<const float> local) {
  if (offset + local.size() > global_size) {
    throw Error(fmt::format("write of '{}' in '{}': range [{}, {}) is outside its {} elements; "
                            "on {}",
                            name, path_, offset, offset + local.size(), global_size, where()));
  }
  const hsize_t dims = global_size;
  H5Handle file_space(GRIDLM_H5_CHECK(H5Screate_simple(1, &dims, nullptr)));
  H5Handle dset(
      GRIDLM_H5_CHECK(H5Dcreate2(file_.get(), name.c_str(), H5T_IEEE_F32LE, file_space.get(),
                                 H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  select_range(file_space.get(), offset, local.size());
  const hsize_t n = local.size();
  H5Handle mem_space(GRIDLM_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  if (n == 0) GRIDLM_H5_CHECK(H5Sselect_none(mem_space.get()));
  H5Handle dxpl = collective_transfer();
  GRIDLM_H5_CHECK(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                           dxpl.get(), local.data()));
}

std::uint64_t ParallelFile::dataset_size(const std::string& name) {
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

void ParallelFile::read_floats(const std::string& name, std::uint64_t offset, Span<float> out) {
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
  H5Handle dxpl = collective_transfer();
  GRIDLM_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                          dxpl.get(), out.data()));
}

} // namespace gridlm::io
