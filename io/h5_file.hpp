// Plain (one-process) HDF5 files for small outputs a single rank writes or reads whole: model
// weights for analysis, the reference dump the PyTorch test reads. Datasets of any rank,
// float32 or int32, and scalar attributes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/h5_handle.hpp"

namespace gridlm::io {

class H5File {
public:
  // Writes go to `path` + ".partial" and are renamed over `path` by commit(), so a crash never
  // leaves a half-written file in place of a good one.
  static H5File create(const std::string& path);
  static H5File open_read(const std::string& path);
  H5File(H5File&& o) noexcept
      : path_(std::move(o.path_)), temp_(std::exchange(o.temp_, {})), file_(std::move(o.file_)) {}
  H5File& operator=(H5File&&) = delete;
  // An uncommitted file is removed: nothing half-written is left behind.
  ~H5File();

  void write(const std::string& name, const std::vector<std::int64_t>& shape, const float* data);
  void write(const std::string& name, const std::vector<std::int64_t>& shape,
             const std::int32_t* data);
  // Raw bytes as a 1-D uint8 dataset (an embedded file, such as a tokenizer model).
  void write_bytes(const std::string& name, const std::string& bytes);
  bool has(const std::string& name);
  std::string read_bytes(const std::string& name);
  void attribute(const std::string& name, double value);
  void attribute(const std::string& name, const std::string& value);
  // A numeric scalar attribute of the root. Throws gridlm::Error naming the file when it is
  // missing or not a number.
  double number_attribute(const std::string& name);
  const std::string& path() const { return path_; }
  // Shape of a dataset, and its float contents (checked against `expected` elements).
  std::vector<std::int64_t> shape(const std::string& name);
  void read(const std::string& name, float* out, std::size_t expected);
  // Closes; for a created file, moves it into place.
  void commit();

private:
  H5File(std::string path, std::string temp, H5Handle id)
      : path_(std::move(path)), temp_(std::move(temp)), file_(std::move(id)) {}
  hid_t group_for(const std::string& name); // creates intermediate groups
  std::string path_, temp_;
  H5Handle file_;
};

} // namespace gridlm::io
