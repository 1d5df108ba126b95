// Building the file a description describes, in memory through the HDF5 API: the reader is
// given only well-formed HDF5 files, so that fuzzing explores what it makes of their structure
// rather than libhdf5's parser (dataset_structure.cpp says why).
#include "tests/fuzz/dataset_model.hpp"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/h5_handle.hpp"

namespace gridlm::fuzz::detail {

using io::H5Handle;

namespace {

// The core driver's name for the file in memory, which never reaches the disk (a directory
// that does not exist, to be sure).
constexpr const char* memory_name = "/nonexistent-gridlm-fuzz/input.h5";

// Data is written only for small datasets (read_dataset_info reads none; the content is there
// so that files look real).
constexpr std::uint64_t max_written = 256;

H5Handle attr_type(const Attr& a) {
  switch (a.type) {
  case AttrType::i64le: return H5Handle(MUST(H5Tcopy(H5T_STD_I64LE)));
  case AttrType::i64be: return H5Handle(MUST(H5Tcopy(H5T_STD_I64BE)));
  case AttrType::i32le: return H5Handle(MUST(H5Tcopy(H5T_STD_I32LE)));
  case AttrType::u64le: return H5Handle(MUST(H5Tcopy(H5T_STD_U64LE)));
  case AttrType::u8: return H5Handle(MUST(H5Tcopy(H5T_STD_U8LE)));
  case AttrType::i8: return H5Handle(MUST(H5Tcopy(H5T_STD_I8LE)));
  case AttrType::u16be: return H5Handle(MUST(H5Tcopy(H5T_STD_U16BE)));
  case AttrType::f64: return H5Handle(MUST(H5Tcopy(H5T_IEEE_F64LE)));
  case AttrType::f32: return H5Handle(MUST(H5Tcopy(H5T_IEEE_F32LE)));
  case AttrType::vlen_utf8:
  case AttrType::vlen_ascii: {
    H5Handle t(MUST(H5Tcopy(H5T_C_S1)));
    MUST(H5Tset_size(t.get(), H5T_VARIABLE));
    MUST(H5Tset_cset(t.get(), a.type == AttrType::vlen_utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII));
    return t;
  }
  case AttrType::fixed_nullterm:
  case AttrType::fixed_nullpad: {
    const bool term = a.type == AttrType::fixed_nullterm;
    H5Handle t(MUST(H5Tcopy(H5T_C_S1)));
    MUST(H5Tset_size(t.get(), std::max<std::size_t>(1, a.text.size() + (term ? 1 : 0))));
    MUST(H5Tset_strpad(t.get(), term ? H5T_STR_NULLTERM : H5T_STR_NULLPAD));
    return t;
  }
  case AttrType::enum_i64: {
    H5Handle t(MUST(H5Tenum_create(H5T_NATIVE_INT64)));
    const std::int64_t zero = 0;
    MUST(H5Tenum_insert(t.get(), "zero", &zero));
    return t;
  }
  default: {
    const hsize_t one = 1;
    return H5Handle(MUST(H5Tarray_create2(H5T_NATIVE_INT64, 1, &one)));
  }
  }
}

H5Handle attr_space(AttrSpace s) {
  const hsize_t one[2] = {1, 1}, two = 2, none = 0;
  switch (s) {
  case AttrSpace::scalar: return H5Handle(MUST(H5Screate(H5S_SCALAR)));
  case AttrSpace::one: return H5Handle(MUST(H5Screate_simple(1, one, nullptr)));
  case AttrSpace::one_by_one: return H5Handle(MUST(H5Screate_simple(2, one, nullptr)));
  case AttrSpace::two: return H5Handle(MUST(H5Screate_simple(1, &two, nullptr)));
  case AttrSpace::null: return H5Handle(MUST(H5Screate(H5S_NULL)));
  default: return H5Handle(MUST(H5Screate_simple(1, &none, nullptr)));
  }
}

void write_attr(hid_t object, const Attr& a) {
  H5Handle type = attr_type(a), space = attr_space(a.space);
  H5Handle attr(
      MUST(H5Acreate2(object, a.name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  const std::size_t n = a.space == AttrSpace::two ? 2 : one_element(a.space) ? 1 : 0;
  if (n == 0) return;
  // Each value written in a memory type HDF5 converts exactly to the file's type.
  auto put = [&](hid_t memory, auto value) {
    const std::vector<decltype(value)> values(n, value);
    MUST(H5Awrite(attr.get(), memory, values.data()));
  };
  const std::int64_t v = a.value;
  switch (a.type) {
  case AttrType::i64le:
  case AttrType::i64be: put(H5T_NATIVE_INT64, v); break;
  case AttrType::enum_i64:
  case AttrType::array_i64: put(type.get(), v); break; // native int64 inside: no conversion
  case AttrType::i32le: put(H5T_NATIVE_INT32, std::int32_t(v)); break;
  case AttrType::u64le: put(H5T_NATIVE_UINT64, std::uint64_t(v)); break;
  case AttrType::u8: put(H5T_NATIVE_UINT8, std::uint8_t(v)); break;
  case AttrType::i8: put(H5T_NATIVE_INT8, std::int8_t(v)); break;
  case AttrType::u16be: put(H5T_NATIVE_UINT16, std::uint16_t(v)); break;
  case AttrType::f64: put(H5T_NATIVE_DOUBLE, double(v)); break;
  case AttrType::f32: put(H5T_NATIVE_FLOAT, float(v)); break;
  case AttrType::vlen_utf8:
  case AttrType::vlen_ascii: put(type.get(), a.text.c_str()); break;
  default: {
    const std::size_t width = H5Tget_size(type.get());
    std::string bytes(n * width, '\0');
    for (std::size_t k = 0; k < n; ++k)
      bytes.replace(k * width, std::min(width, a.text.size()), a.text, 0, width);
    MUST(H5Awrite(attr.get(), type.get(), bytes.data()));
  }
  }
}

H5Handle dataset_type(DType t) {
  switch (t) {
  case DType::u16le: return H5Handle(MUST(H5Tcopy(H5T_STD_U16LE)));
  case DType::u32le: return H5Handle(MUST(H5Tcopy(H5T_STD_U32LE)));
  case DType::u64le: return H5Handle(MUST(H5Tcopy(H5T_STD_U64LE)));
  case DType::u8: return H5Handle(MUST(H5Tcopy(H5T_STD_U8LE)));
  case DType::i16le: return H5Handle(MUST(H5Tcopy(H5T_STD_I16LE)));
  case DType::i32le: return H5Handle(MUST(H5Tcopy(H5T_STD_I32LE)));
  case DType::i64le: return H5Handle(MUST(H5Tcopy(H5T_STD_I64LE)));
  case DType::u16be: return H5Handle(MUST(H5Tcopy(H5T_STD_U16BE)));
  case DType::u32be: return H5Handle(MUST(H5Tcopy(H5T_STD_U32BE)));
  case DType::u64be: return H5Handle(MUST(H5Tcopy(H5T_STD_U64BE)));
  case DType::f32: return H5Handle(MUST(H5Tcopy(H5T_IEEE_F32LE)));
  case DType::f64: return H5Handle(MUST(H5Tcopy(H5T_IEEE_F64LE)));
  case DType::fixed_string: {
    H5Handle s(MUST(H5Tcopy(H5T_C_S1)));
    MUST(H5Tset_size(s.get(), 8));
    return s;
  }
  case DType::enum_u16: {
    H5Handle e(MUST(H5Tenum_create(H5T_NATIVE_UINT16)));
    const std::uint16_t zero = 0;
    MUST(H5Tenum_insert(e.get(), "zero", &zero));
    return e;
  }
  default: return H5Handle(MUST(H5Tcopy(H5T_STD_B16LE)));
  }
}

// Element values of a dataset's content: token ids, document offsets or model bytes.
std::vector<std::uint64_t> content(const Model& m, int i, std::uint64_t n) {
  const Dset& d = m.dsets[std::size_t(i)];
  const bool offsets = i == d_offsets || i == d_valid_offsets;
  const std::uint64_t vocab = std::uint64_t(std::max<std::int64_t>(1, m.attrs[a_vocab].value));
  const std::uint64_t end = m.dsets[std::size_t(i == d_offsets ? d_tokens : d_valid_tokens)].n;
  std::vector<std::uint64_t> v(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t good = offsets ? (n > 1 ? end / (n - 1) * k : 0) : k % vocab;
    switch (d.content) {
    case Content::decreasing: v[k] = n - k; break;
    case Content::beyond: v[k] = (offsets ? end : vocab) + 1 + k; break;
    case Content::zeros: v[k] = 0; break;
    default: v[k] = good;
    }
  }
  if (offsets && d.content == Content::good && n > 1) v[n - 1] = end;
  return v;
}

void create_dataset(hid_t file, const std::string& path, const Model& m, int i) {
  const Dset& d = m.dsets[std::size_t(i)];
  H5Handle type = dataset_type(d.type);
  const hsize_t unlimited = H5S_UNLIMITED;
  H5Handle dcpl(MUST(H5Pcreate(H5P_DATASET_CREATE)));
  H5Handle space;
  if (d.shape == Shape::scalar || d.shape == Shape::null) {
    space = H5Handle(MUST(H5Screate(d.shape == Shape::scalar ? H5S_SCALAR : H5S_NULL)));
  } else {
    const int rank = d.shape == Shape::one_d ? 1 : 2;
    const int axis = d.shape == Shape::one_by_n ? 1 : 0; // the long one
    hsize_t dims[2] = {1, 1}, max[2] = {1, 1}, chunk[2] = {1, 1};
    dims[axis] = max[axis] = d.n;
    chunk[axis] = std::clamp<hsize_t>(d.n, 1, 64);
    const std::uint64_t bytes = d.n * std::uint64_t(element_bytes(d.type));
    const bool chunked = d.layout == Layout::chunked || d.layout == Layout::extendible ||
                         d.layout == Layout::deflate;
    if (chunked) {
      // A fixed-size dimension must hold a whole chunk: empty ones are made extendible.
      if (d.layout == Layout::extendible || d.n == 0) max[axis] = unlimited;
      MUST(H5Pset_chunk(dcpl.get(), rank, chunk));
      if (d.layout == Layout::deflate) MUST(H5Pset_deflate(dcpl.get(), 1));
    } else if (d.layout == Layout::compact && bytes <= 32768) {
      MUST(H5Pset_layout(dcpl.get(), H5D_COMPACT));
    }
    space = H5Handle(MUST(H5Screate_simple(rank, dims, max)));
  }
  H5Handle dset(MUST(H5Dcreate2(file, path.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT)));
  const hssize_t points = MUST(H5Sget_simple_extent_npoints(space.get()));
  const bool numeric =
      d.type != DType::fixed_string && d.type != DType::enum_u16 && d.type != DType::bitfield16;
  if (d.content != Content::none && numeric && points > 0 && std::uint64_t(points) <= max_written) {
    const std::vector<std::uint64_t> values = content(m, i, std::uint64_t(points));
    MUST(H5Dwrite(dset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  }
}

void make_group(hid_t file, const std::string& path) {
  H5Handle(MUST(H5Gcreate2(file, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

void commit_type(hid_t file, const std::string& path) {
  H5Handle type(MUST(H5Tcopy(H5T_STD_U16LE)));
  MUST(H5Tcommit2(file, path.c_str(), type.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
}

void soft_link(hid_t file, const std::string& target, const std::string& path) {
  MUST(H5Lcreate_soft(target.c_str(), file, path.c_str(), H5P_DEFAULT, H5P_DEFAULT));
}

bool exists_at_root(hid_t file, const std::string& name) {
  return MUST(H5Lexists(file, name.c_str(), H5P_DEFAULT)) > 0;
}

// For --describe, the file's image is taken as the core driver frees its memory at close, once
// HDF5 has written everything, the superblock last. (H5Fget_file_image on the open file is no
// good: with the latest formats, HDF5 1.10.8 gives a superblock whose checksum fails on
// opening.) The driver sizes its memory in steps: the image may run past the end of the file,
// as a file on disk may.
void* image_malloc(std::size_t size, H5FD_file_image_op_t, void* udata) {
  static_cast<ImageCapture*>(udata)->size = size;
  return std::malloc(size);
}
void* image_memcpy(void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void*) {
  return std::memcpy(dest, src, size);
}
void* image_realloc(void* ptr, std::size_t size, H5FD_file_image_op_t, void* udata) {
  static_cast<ImageCapture*>(udata)->size = size;
  return std::realloc(ptr, size);
}
herr_t image_free(void* ptr, H5FD_file_image_op_t op, void* udata) {
  auto* capture = static_cast<ImageCapture*>(udata);
  if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr != nullptr) {
    const char* bytes = static_cast<const char*>(ptr);
    capture->image.assign(bytes, bytes + capture->size);
  }
  std::free(ptr);
  return 0;
}
void* udata_copy(void* udata) { return udata; }
herr_t udata_free(void*) { return 0; }

} // namespace

H5Handle build(const Model& m, ImageCapture* capture) {
  H5Handle fapl(MUST(H5Pcreate(H5P_FILE_ACCESS)));
  MUST(H5Pset_fapl_core(fapl.get(), 1 << 16, false));
  H5FD_file_image_callbacks_t callbacks = {image_malloc, image_memcpy, image_realloc, image_free,
                                           udata_copy,   udata_free,   capture};
  if (capture != nullptr) MUST(H5Pset_file_image_callbacks(fapl.get(), &callbacks));
  if (m.latest_format) MUST(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST));
  H5Handle file(MUST(H5Fcreate(memory_name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get())));
  const hid_t f = file.get();
  make_group(f, "/stash"); // targets of links, out of the reader's way

  for (const Attr& a : m.attrs)
    if (a.present) write_attr(f, a);

  std::array<std::optional<std::string>, group_count> group_at; // real path of each group
  for (int g = 0; g < group_count; ++g) {
    const std::string path = fmt::format("/{}", group_names[std::size_t(g)]);
    const std::string stashed = fmt::format("/stash/group_{}", group_names[std::size_t(g)]);
    switch (m.groups[std::size_t(g)]) {
    case GroupPlace::group:
      make_group(f, path);
      group_at[std::size_t(g)] = path;
      break;
    case GroupPlace::soft_link:
      make_group(f, stashed);
      soft_link(f, stashed, path);
      group_at[std::size_t(g)] = stashed;
      break;
    case GroupPlace::dataset: {
      const hsize_t one = 1;
      H5Handle space(MUST(H5Screate_simple(1, &one, nullptr)));
      H5Handle(MUST(H5Dcreate2(f, path.c_str(), H5T_STD_U8LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT)));
      break;
    }
    case GroupPlace::dangling: soft_link(f, stashed + "_missing", path); break;
    case GroupPlace::named_type: commit_type(f, path); break;
    default: break;
    }
  }

  for (int i = 0; i < dset_count; ++i) {
    const int g = dset_group[std::size_t(i)];
    if (g >= 0 && !group_at[std::size_t(g)]) continue; // no group to hold it
    const std::string path =
        fmt::format("{}/{}", g >= 0 ? *group_at[std::size_t(g)] : "", dset_leaf[std::size_t(i)]);
    const std::string stashed = fmt::format("/stash/dataset_{}", i);
    switch (m.dsets[std::size_t(i)].place) {
    case Place::dataset: create_dataset(f, path, m, i); break;
    case Place::group: make_group(f, path); break;
    case Place::soft_link:
      create_dataset(f, stashed, m, i);
      soft_link(f, stashed, path);
      break;
    case Place::hard_link:
      create_dataset(f, stashed, m, i);
      MUST(H5Lcreate_hard(f, stashed.c_str(), f, path.c_str(), H5P_DEFAULT, H5P_DEFAULT));
      break;
    case Place::dangling: soft_link(f, stashed + "_missing", path); break;
    case Place::loop: soft_link(f, path, path); break;
    case Place::external:
      MUST(H5Lcreate_external("/nonexistent-gridlm-fuzz/other.h5", "/tokens", f, path.c_str(),
                              H5P_DEFAULT, H5P_DEFAULT));
      break;
    case Place::named_type: commit_type(f, path); break;
    case Place::link_to_root: soft_link(f, "/", path); break;
    default: break;
    }
  }

  // Objects the format does not name, which the reader must ignore.
  for (const Extra& e : m.extras) {
    const std::string path = fmt::format("/extra_{}_{}", e.kind, e.slot);
    if (exists_at_root(f, path)) continue;
    switch (e.kind) {
    case 0: {
      Model small = m;
      small.dsets[d_tokens] =
          Dset{Place::dataset, DType::u32le, Shape::one_d, Layout::contiguous, 3, Content::good};
      create_dataset(f, path, small, d_tokens);
      break;
    }
    case 1:
      make_group(f, path);
      make_group(f, path + "/tokens");
      break;
    case 2: {
      make_group(f, path);
      H5Handle group(MUST(H5Gopen2(f, path.c_str(), H5P_DEFAULT)));
      Attr a("format");
      a.type = AttrType::vlen_utf8;
      a.text = "not-gridlm";
      write_attr(group.get(), a);
      break;
    }
    default: soft_link(f, "/nowhere", path); break;
    }
  }

  return file;
}

} // namespace gridlm::fuzz::detail
