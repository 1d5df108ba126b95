// The description of a dataset file that an input of the dataset-structure fuzz target decodes
// to, and what its parts need of one another: decoding (dataset_input.cpp), judging by the
// documented format (dataset_judge.cpp), building the file (dataset_build.cpp) and reporting
// (dataset_describe.cpp), which the property (dataset_structure.cpp) puts together. Private to
// the target: the replay driver and libFuzzer see dataset_structure.hpp.
#pragma once

#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "io/h5_handle.hpp"
#include "io/token_dataset.hpp"
#include "tests/fuzz/dataset_structure.hpp"

namespace gridlm::fuzz::detail {

// The name read_dataset_info is told (for its messages).
constexpr const char* input_name = "fuzz-input.h5";

// ---------------------------------------------------------------------------------------------
// The description of a file.

enum class AttrType : std::uint8_t {
  i64le,
  i64be,
  i32le,
  u64le,
  u8,
  i8,
  u16be,
  f64,
  f32,
  vlen_utf8,
  vlen_ascii,
  fixed_nullterm,
  fixed_nullpad,
  enum_i64,
  array_i64,
  count
};
// one and one_by_one hold one element, as a scalar does; two, null and empty do not.
enum class AttrSpace : std::uint8_t { scalar, one, one_by_one, two, null, empty, count };

struct Attr {
  explicit Attr(const char* n = "") : name(n) {}
  const char* name;
  bool present = true;
  AttrType type = AttrType::i64le;
  AttrSpace space = AttrSpace::scalar;
  std::int64_t value = 0; // as written by integer and float types
  std::string text;       // as written by string types
};

enum AttrIndex {
  a_format,
  a_version,
  a_vocab,
  a_bos,
  a_eos,
  a_unk,
  a_pad,
  a_tokens,
  a_documents,
  a_valid_tokens,
  a_valid_documents,
  a_tokenizer,
  a_created_by,
  // Written by prepare-data, not checked by the reader.
  a_valid_fraction,
  a_seed,
  a_gridlm_version,
  a_description,
  attr_count
};
constexpr std::array<const char*, attr_count> attr_names = {"format",
                                                            "format_version",
                                                            "vocab_size",
                                                            "bos_id",
                                                            "eos_id",
                                                            "unk_id",
                                                            "pad_id",
                                                            "n_tokens",
                                                            "n_documents",
                                                            "valid_n_tokens",
                                                            "valid_n_documents",
                                                            "tokenizer",
                                                            "created_by",
                                                            "valid_fraction",
                                                            "seed",
                                                            "gridlm_version",
                                                            "description"};

// What is at a dataset's path.
enum class Place : std::uint8_t {
  dataset,
  absent,
  group,
  soft_link,
  hard_link,
  dangling,
  loop,
  external,
  named_type,
  link_to_root,
  count
};
enum class DType : std::uint8_t {
  u16le,
  u32le,
  u64le,
  u8,
  i16le,
  i32le,
  i64le,
  u16be,
  u32be,
  u64be,
  f32,
  f64,
  fixed_string,
  enum_u16,
  bitfield16,
  count
};
enum class Shape : std::uint8_t { one_d, scalar, null, n_by_1, one_by_n, count };
enum class Layout : std::uint8_t { contiguous, chunked, extendible, deflate, compact, count };
enum class Content : std::uint8_t { good, decreasing, beyond, zeros, none, count };

struct Dset {
  Place place = Place::dataset;
  DType type = DType::u16le;
  Shape shape = Shape::one_d;
  Layout layout = Layout::extendible;
  std::uint64_t n = 0; // elements along the dataset's long axis
  Content content = Content::good;
};

enum DsetIndex { d_tokens, d_offsets, d_valid_tokens, d_valid_offsets, d_model, dset_count };
enum GroupIndex { g_valid, g_tokenizer, group_count };
constexpr std::array<int, dset_count> dset_group = {-1, -1, g_valid, g_valid, g_tokenizer};
constexpr std::array<const char*, dset_count> dset_leaf = {"tokens", "doc_offsets", "tokens",
                                                           "doc_offsets", "model"};
constexpr std::array<const char*, group_count> group_names = {"valid", "tokenizer"};

enum class GroupPlace : std::uint8_t {
  group,
  absent,
  dataset,
  soft_link,
  dangling,
  named_type,
  count
};

struct Extra {
  int kind, slot;
};

struct Model {
  bool latest_format = false; // HDF5's newest object formats instead of the earliest
  std::array<Attr, attr_count> attrs;
  std::array<Dset, dset_count> dsets;
  std::array<GroupPlace, group_count> groups{GroupPlace::group, GroupPlace::group};
  std::vector<Extra> extras;
  int ops = 0;
};

// The header: a valid file of these sizes.
struct Header {
  bool wide_tokens = false; // uint32 tokens even where uint16 would do
  bool latest_format = false;
  std::int64_t vocab = 1;
  std::array<std::int64_t, 4> ids{-1, -1, -1, -1};
  std::uint64_t tokens = 0, documents = 0, valid_tokens = 0, valid_documents = 0;
  std::uint64_t model_bytes = 1;
  std::string tokenizer, created_by;
};

// The operations, by opcode.
enum Op {
  op_remove_attr,
  op_attr_type,
  op_attr_space,
  op_attr_int,
  op_attr_text,
  op_place,
  op_type,
  op_shape,
  op_layout,
  op_size,
  op_content,
  op_group,
  op_extra,
  op_sync_counts,
  op_count
};

// How many values the first argument byte of an operation chooses among.
constexpr int integer_choices = 20, text_choices = 8, size_choices = 6, extra_kinds = 4;

// The bytes of an input that is this header and no operations: a valid file (the seeds).
Bytes write_header(const Header& h);
// Every byte string decodes to something (bytes past the end read as zero).
Model decode(const std::uint8_t* data, std::size_t size);

// ---------------------------------------------------------------------------------------------
// Judging a description by the documented format (dataset_judge.cpp).

// The format's view of types and spaces, which the builder and the reports share.
bool is_string(AttrType t);
bool one_element(AttrSpace s);
int element_bytes(DType t);

struct Verdict {
  std::optional<io::DatasetInfo> info; // set when the file is valid
  std::string why;                     // else the first rule it breaks
};
Verdict judge(const Model& m);

// ---------------------------------------------------------------------------------------------
// Building the file (dataset_build.cpp).

// Builder calls must succeed: a failure is a fault of this harness, not of the reader.
template <class T>
T must(T rc, const char* call) {
  if (rc < 0) {
    std::fprintf(stderr, "fuzz harness: HDF5 call %s failed while building the file\n", call);
    H5Eprint2(H5E_DEFAULT, stderr);
    std::abort();
  }
  return rc;
}
#define MUST(call) must((call), #call)

// The file's image, taken for --describe (how, and why so: dataset_build.cpp).
struct ImageCapture {
  std::size_t size = 0;
  std::vector<char> image;
};

// The file, in memory and open. The reader is given it as it is: closing it and opening its
// image again, as a reader on disk would, would double the time of an input (most of it HDF5
// setting up a metadata cache for each open) for no difference to what the reader sees.
io::H5Handle build(const Model& m, ImageCapture* capture = nullptr);

// ---------------------------------------------------------------------------------------------
// Describing a description, for reports (dataset_describe.cpp).

std::string describe(const Model& m);
std::string describe(const io::DatasetInfo& i);

} // namespace gridlm::fuzz::detail
