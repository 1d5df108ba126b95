// One-process HDF5 files with atomic replacement.
#include "io/h5_file.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "io/h5_check.hpp"
#include "io/parallel_h5.hpp"

namespace gridlm::io {
namespace {

H5Handle dataspace(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return H5Handle(GRIDLM_H5_CHECK(H5Screate(H5S_SCALAR)));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5Handle(GRIDLM_H5_CHECK(H5Screate_simple(int(dims.size()), dims.data(), nullptr)));
}

void write_dataset(hid_t file, const std::string& name, const std::vector<std::int64_t>& shape,
                   hid_t file_type, hid_t mem_type, const void* data) {
  H5Handle space = dataspace(shape);
  H5Handle lcpl(GRIDLM_H5_CHECK(H5Pcreate(H5P_LINK_CREATE)));
  GRIDLM_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1));
  H5Handle dset(GRIDLM_H5_CHECK(H5Dcreate2(file, name.c_str(), file_type, space.get(), lcpl.get(),
                                           H5P_DEFAULT, H5P_DEFAULT)));
  GRIDLM_H5_CHECK(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

} // namespace

H5File H5File::create(const std::string& path) {
  detail::quiet_hdf5_errors();
  const std::string temp = path + ".partial";
  hid_t id = H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) {
    throw Error(fmt::format("cannot create '{}': check that the directory exists and is "
                            "writable; on {}",
                            temp, where()));
  }
  return H5File(path, temp, H5Handle(id));
}

H5File H5File::open_read(const std::string& path) {
  detail::quiet_hdf5_errors();
  const std::string problem = hdf5_file_problem(path);
  if (!problem.empty()) throw Error(fmt::format("cannot open '{}': it {}", path, problem));
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw Error(damaged_hdf5_message(path));
  return H5File(path, "", H5Handle(id));
}

void H5File::write(const std::string& name, const std::vector<std::int64_t>& shape,
                   const float* data) {
  write_dataset(file_.get(), name, shape, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data);
}

void H5File::write(const std::string& name, const std::vector<std::int64_t>& shape,
                   const std::int32_t* data) {
  write_dataset(file_.get(), name, shape, H5T_STD_I32LE, H5T_NATIVE_INT32, data);
}

void H5File::write_bytes(const std::string& name, const std::string& bytes) {
  write_dataset(file_.get(), name, {std::int64_t(bytes.size())}, H5T_STD_U8LE, H5T_NATIVE_UCHAR,
                bytes.data());
}

bool H5File::has(const std::string& name) {
  // Each intermediate group must exist before H5Lexists may be asked about the next level.
  std::size_t at = 0;
  while (true) {
    at = name.find('/', at + 1);
    const std::string part = name.substr(0, at);
    if (H5Lexists(file_.get(), part.c_str(), H5P_DEFAULT) <= 0) return false;
    if (at == std::string::npos) return true;
  }
}

std::string H5File::read_bytes(const std::string& name) {
  std::size_t n = 1;
  for (auto d : shape(name))
    n *= std::size_t(d);
  std::string out(n, '\0');
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  GRIDLM_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()));
  return out;
}

void H5File::attribute(const std::string& name, double value) {
  H5Handle space(GRIDLM_H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Handle attr(GRIDLM_H5_CHECK(H5Acreate2(file_.get(), name.c_str(), H5T_IEEE_F64LE, space.get(),
                                           H5P_DEFAULT, H5P_DEFAULT)));
  GRIDLM_H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value));
}

void H5File::attribute(const std::string& name, const std::string& value) {
  H5Handle type(GRIDLM_H5_CHECK(H5Tcopy(H5T_C_S1)));
  GRIDLM_H5_CHECK(H5Tset_size(type.get(), value.empty() ? 1 : value.size()));
  H5Handle space(GRIDLM_H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Handle attr(GRIDLM_H5_CHECK(
      H5Acreate2(file_.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  GRIDLM_H5_CHECK(H5Awrite(attr.get(), type.get(), value.empty() ? "" : value.data()));
}

double H5File::number_attribute(const std::string& name) {
  if (H5Aexists(file_.get(), name.c_str()) <= 0) {
    throw Error(fmt::format("'{}' has no attribute '{}'", path_, name));
  }
  H5Handle attr(GRIDLM_H5_CHECK(H5Aopen(file_.get(), name.c_str(), H5P_DEFAULT)));
  H5Handle type(GRIDLM_H5_CHECK(H5Aget_type(attr.get())));
  H5Handle space(GRIDLM_H5_CHECK(H5Aget_space(attr.get())));
  const H5T_class_t cls = H5Tget_class(type.get());
  if ((cls != H5T_FLOAT && cls != H5T_INTEGER) ||
      GRIDLM_H5_CHECK(H5Sget_simple_extent_npoints(space.get())) != 1) {
    throw Error(fmt::format("'{}': attribute '{}' is not a single number", path_, name));
  }
  double value = 0.0;
  GRIDLM_H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value));
  return value;
}

std::vector<std::int64_t> H5File::shape(const std::string& name) {
  if (H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0) {
    throw Error(fmt::format("'{}' has no dataset '{}'", path_, name));
  }
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  H5Handle space(GRIDLM_H5_CHECK(H5Dget_space(dset.get())));
  const int rank = GRIDLM_H5_CHECK(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(rank);
  GRIDLM_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return std::vector<std::int64_t>(dims.begin(), dims.end());
}

void H5File::read(const std::string& name, float* out, std::size_t expected) {
  std::size_t n = 1;
  for (auto d : shape(name))
    n *= std::size_t(d);
  if (n != expected) {
    throw Error(
        fmt::format("dataset '{}' in '{}' has {} elements, expected {}", name, path_, n, expected));
  }
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)));
  GRIDLM_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out));
}

H5File::~H5File() {
  if (temp_.empty()) return;
  file_.reset();
  std::remove(temp_.c_str());
}

void H5File::commit() {
  file_.reset();
  if (temp_.empty()) return;
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    throw Error(fmt::format("cannot move '{}' to '{}'; on {}", temp_, path_, where()));
  }
  temp_.clear();
}

} // namespace gridlm::io
