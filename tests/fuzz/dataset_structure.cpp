// Fuzz target of io::read_dataset_info, the structure check every dataset file goes through
// before training reads it (issue #6).
//
// The fuzzer's bytes are not the file. Raw-byte fuzzing of HDF5 files mostly finds faults
// inside libhdf5's parser, which are not ours to fix and would make CI flaky. Instead an input
// is decoded into a description of a file (which objects exist at which path, their types,
// shapes, layouts, the root attributes' types, shapes and values, links, extra objects), the
// file is built in memory through the HDF5 API (core driver, no disk) and given to the reader.
// Every input is thus a well-formed HDF5 file, and the fuzzer explores what our reader makes
// of its structure.
//
// Input layout: a header describing a valid file (vocabulary, special ids, split sizes,
// tokenizer model size, two strings), then operations until the input ends, each one byte of
// opcode and its arguments, that damage or vary it. An input with no operations is a valid
// file; bytes past the end read as zero, so every byte string decodes to something.
//
// The property, for every input: read_dataset_info either returns exactly what the file says,
// when the file is valid by docs/formats/dataset.md, or throws gridlm::Error naming the file.
// Which files are valid is decided here by judge(), a model of the documented rules written
// from the description, independently of the reader: a reader that skipped a check accepts
// a file judge() refuses, and the property fails. Besides, the reader must not crash (the
// fuzz build runs under ASan and UBSan), throw anything else, let HDF5 print an error stack
// on stderr (for a caller that left HDF5's printing on), or leave an HDF5 object open. A
// violation prints the file's description and aborts.
#include "tests/fuzz/dataset_structure.hpp"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "io/dataset_writer.hpp"
#include "io/h5_handle.hpp"
#include "io/token_dataset.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::fuzz {
namespace {

using io::H5Handle;

// The name read_dataset_info is told (for its messages), and the core driver's name for the
// file in memory, which never reaches the disk (a directory that does not exist, to be sure).
constexpr const char* input_name = "fuzz-input.h5";
constexpr const char* memory_name = "/nonexistent-gridlm-fuzz/input.h5";

// Sizes stay below 2^40 elements: large enough for counts far beyond any real file, small
// enough that no size computation overflows. Data is written only for small datasets
// (read_dataset_info reads none; the content is there so that files look real).
constexpr std::uint64_t max_elements = std::uint64_t(1) << 40;
constexpr std::uint64_t max_written = 256;

// ---------------------------------------------------------------------------------------------
// Input bytes.

class Reader {
public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  // LEB128: 7 bits a byte, high bit set on all but the last.
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const std::uint8_t b = byte();
      v |= std::uint64_t(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    return v;
  }
  std::uint64_t raw64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= std::uint64_t(byte()) << (8 * i);
    return v;
  }
  std::string text() {
    std::string s(byte(), '\0');
    for (char& c : s)
      c = char(byte());
    return s;
  }

private:
  const std::uint8_t* data_;
  std::size_t size_, at_ = 0;
};

class Writer {
public:
  Writer& byte(int b) {
    out.push_back(std::uint8_t(b));
    return *this;
  }
  Writer& varint(std::uint64_t v) {
    while (v >= 0x80) {
      out.push_back(std::uint8_t(v | 0x80));
      v >>= 7;
    }
    out.push_back(std::uint8_t(v));
    return *this;
  }
  Writer& text(const std::string& s) {
    const std::size_t n = std::min<std::size_t>(s.size(), 255);
    byte(int(n));
    out.insert(out.end(), s.begin(), s.begin() + std::ptrdiff_t(n));
    return *this;
  }
  Bytes out;
};

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

template <class E>
E pick(Reader& r) {
  return E(r.byte() % std::uint8_t(E::count));
}

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

Header read_header(Reader& r) {
  Header h;
  const std::uint8_t flags = r.byte();
  h.wide_tokens = (flags & 1) != 0;
  h.latest_format = (flags & 2) != 0;
  h.vocab = 1 + std::int64_t(r.varint() % std::uint64_t(std::numeric_limits<std::int32_t>::max()));
  for (std::int64_t& id : h.ids)
    id = std::int64_t(r.varint() % std::uint64_t(h.vocab + 1)) - 1;
  h.tokens = r.varint() % max_elements;
  h.documents = r.varint() % max_elements;
  h.valid_tokens = r.varint() % max_elements;
  h.valid_documents = r.varint() % max_elements;
  h.model_bytes = 1 + r.varint() % max_elements;
  h.tokenizer = r.text();
  h.created_by = r.text();
  return h;
}

Bytes write_header(const Header& h) {
  Writer w;
  w.byte((h.wide_tokens ? 1 : 0) | (h.latest_format ? 2 : 0)).varint(std::uint64_t(h.vocab - 1));
  for (std::int64_t id : h.ids)
    w.varint(std::uint64_t(id + 1));
  w.varint(h.tokens).varint(h.documents).varint(h.valid_tokens).varint(h.valid_documents);
  w.varint(h.model_bytes - 1).text(h.tokenizer).text(h.created_by);
  return w.out;
}

Model model_of(const Header& h) {
  Model m;
  m.latest_format = h.latest_format;
  for (int i = 0; i < attr_count; ++i)
    m.attrs[std::size_t(i)].name = attr_names[std::size_t(i)];
  auto integer = [&](int i, std::int64_t v) {
    m.attrs[std::size_t(i)].value = v;
    m.attrs[std::size_t(i)].text = std::to_string(v); // what a "number as text" attribute says
  };
  auto text = [&](int i, const std::string& s) {
    m.attrs[std::size_t(i)].type = AttrType::vlen_utf8;
    m.attrs[std::size_t(i)].text = s;
  };
  text(a_format, io::dataset_format);
  integer(a_version, io::dataset_format_version);
  integer(a_vocab, h.vocab);
  for (int i = 0; i < 4; ++i)
    integer(a_bos + i, h.ids[std::size_t(i)]);
  integer(a_tokens, std::int64_t(h.tokens));
  integer(a_documents, std::int64_t(h.documents));
  integer(a_valid_tokens, std::int64_t(h.valid_tokens));
  integer(a_valid_documents, std::int64_t(h.valid_documents));
  text(a_tokenizer, h.tokenizer);
  text(a_created_by, h.created_by);
  m.attrs[a_valid_fraction].type = AttrType::f64;
  integer(a_seed, 7);
  text(a_gridlm_version, "0.1.0");
  text(a_description, "gridlm tokenized dataset (docs/formats/dataset.md)");

  const DType tokens =
      h.wide_tokens || h.vocab > io::narrow_vocab_limit ? DType::u32le : DType::u16le;
  m.dsets[d_tokens] = {Place::dataset,     tokens,   Shape::one_d,
                       Layout::extendible, h.tokens, Content::good};
  m.dsets[d_valid_tokens] = {Place::dataset,     tokens,         Shape::one_d,
                             Layout::extendible, h.valid_tokens, Content::good};
  m.dsets[d_offsets] = {Place::dataset,     DType::u64le,    Shape::one_d,
                        Layout::extendible, h.documents + 1, Content::good};
  m.dsets[d_valid_offsets] = {Place::dataset,     DType::u64le,          Shape::one_d,
                              Layout::extendible, h.valid_documents + 1, Content::good};
  m.dsets[d_model] = {Place::dataset,     DType::u8,     Shape::one_d,
                      Layout::contiguous, h.model_bytes, Content::good};
  return m;
}

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

std::int64_t integer_value(Reader& r, std::int64_t now) {
  constexpr std::int64_t i32max = std::numeric_limits<std::int32_t>::max();
  constexpr std::int64_t i64max = std::numeric_limits<std::int64_t>::max();
  switch (r.byte() % integer_choices) {
  case 0: return 0;
  case 1: return 1;
  case 2: return -1;
  case 3: return 2;
  case 4: return -2;
  case 5: return std::int64_t(std::uint64_t(now) + 1); // wraps, as the file's bits would
  case 6: return std::int64_t(std::uint64_t(now) - 1);
  case 7: return 255;
  case 8: return 256;
  case 9: return 65535;
  case 10: return 65536;
  case 11: return 65537;
  case 12: return i32max;
  case 13: return i32max + 1;
  case 14: return i64max;
  case 15: return std::numeric_limits<std::int64_t>::min();
  case 16: return std::int64_t(r.raw64());
  case 17: return std::int8_t(r.byte());
  case 18: return std::int64_t(r.varint() % max_elements);
  default: return -std::int64_t(r.varint() % max_elements);
  }
}

std::string text_value(Reader& r, const Attr& a) {
  switch (r.byte() % text_choices) {
  case 0: return io::dataset_format;
  case 1: return "";
  case 2: return "gridlm-token";
  case 3: return "gridlm-tokens ";
  case 4: return std::string("gridlm-tokens\0!", 15); // a reader of C strings sees the format
  case 5: return "GRIDLM-TOKENS";
  case 6: return r.text();
  default: return std::to_string(a.value);
  }
}

std::uint64_t size_value(Reader& r, std::uint64_t now) {
  switch (r.byte() % size_choices) {
  case 0: return (now + 1) % max_elements;
  case 1: return now > 0 ? now - 1 : 0;
  case 2: return 0;
  case 3: return 1;
  case 4: return (now * 2) % max_elements;
  default: return r.varint() % max_elements;
  }
}

void apply(Model& m, Reader& r) {
  ++m.ops;
  // Every operation reads the object it acts on, then its argument: locals fix that order
  // (in `a[r.byte()] = pick(r)` C++17 reads the right-hand side first).
  const int op = r.byte() % op_count;
  const int target = r.byte();
  Attr& a = m.attrs[std::size_t(target % attr_count)];
  Dset& d = m.dsets[std::size_t(target % dset_count)];
  switch (op) {
  case op_remove_attr: a.present = false; break;
  case op_attr_type:
    a.present = true;
    a.type = pick<AttrType>(r);
    break;
  case op_attr_space: a.space = pick<AttrSpace>(r); break;
  case op_attr_int: a.value = integer_value(r, a.value); break;
  case op_attr_text: a.text = text_value(r, a); break;
  case op_place: d.place = pick<Place>(r); break;
  case op_type: d.type = pick<DType>(r); break;
  case op_shape: d.shape = pick<Shape>(r); break;
  case op_layout: d.layout = pick<Layout>(r); break;
  case op_size: d.n = size_value(r, d.n); break;
  case op_content: d.content = pick<Content>(r); break;
  case op_group: m.groups[std::size_t(target % group_count)] = pick<GroupPlace>(r); break;
  case op_extra:
    if (m.extras.size() < 8) m.extras.push_back({target % extra_kinds, r.byte() % 4});
    break;
  default: {
    // Counts made to agree with the datasets as they now are: lets a changed size reach the
    // checks after the count comparison.
    const std::pair<int, std::int64_t> counts[] = {
        {a_tokens, std::int64_t(m.dsets[d_tokens].n)},
        {a_documents, std::int64_t(m.dsets[d_offsets].n) - 1},
        {a_valid_tokens, std::int64_t(m.dsets[d_valid_tokens].n)},
        {a_valid_documents, std::int64_t(m.dsets[d_valid_offsets].n) - 1}};
    for (const auto& [i, v] : counts) {
      Attr& count = m.attrs[std::size_t(i)];
      count = Attr(count.name);
      count.value = v;
    }
    break;
  }
  }
}

Model decode(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  Model m = model_of(read_header(r));
  while (!r.done())
    apply(m, r);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Judging a description by the documented format (docs/formats/dataset.md), as the reader
// is meant to.

bool is_string(AttrType t) {
  return t == AttrType::vlen_utf8 || t == AttrType::vlen_ascii || t == AttrType::fixed_nullterm ||
         t == AttrType::fixed_nullpad;
}
bool is_integer(AttrType t) {
  return t == AttrType::i64le || t == AttrType::i64be || t == AttrType::i32le ||
         t == AttrType::u64le || t == AttrType::u8 || t == AttrType::i8 || t == AttrType::u16be;
}
bool one_element(AttrSpace s) {
  return s == AttrSpace::scalar || s == AttrSpace::one || s == AttrSpace::one_by_one;
}

// The value an integer attribute reads as int64: what was stored in its type, with HDF5's
// conversion clipping what does not fit (an unsigned value above INT64_MAX).
std::int64_t stored_integer(const Attr& a) {
  const std::int64_t v = a.value;
  switch (a.type) {
  case AttrType::i32le: return std::int32_t(v);
  case AttrType::u8: return std::uint8_t(v);
  case AttrType::i8: return std::int8_t(v);
  case AttrType::u16be: return std::uint16_t(v);
  case AttrType::u64le: return v < 0 ? std::numeric_limits<std::int64_t>::max() : v;
  default: return v;
  }
}

std::optional<std::int64_t> integer_attr(const Model& m, int i) {
  const Attr& a = m.attrs[std::size_t(i)];
  if (!a.present || !is_integer(a.type) || !one_element(a.space)) return std::nullopt;
  return stored_integer(a);
}

// Strings read as C strings: up to the first NUL.
std::optional<std::string> text_attr(const Model& m, int i) {
  const Attr& a = m.attrs[std::size_t(i)];
  if (!a.present || !is_string(a.type) || !one_element(a.space)) return std::nullopt;
  return a.text.substr(0, a.text.find('\0'));
}

int element_bytes(DType t) {
  switch (t) {
  case DType::u8: return 1;
  case DType::u16le:
  case DType::u16be:
  case DType::i16le:
  case DType::enum_u16:
  case DType::bitfield16: return 2;
  case DType::u32le:
  case DType::u32be:
  case DType::i32le:
  case DType::f32: return 4;
  case DType::fixed_string: return 8;
  default: return 8;
  }
}
bool is_unsigned_integer(DType t) {
  return t == DType::u8 || t == DType::u16le || t == DType::u32le || t == DType::u64le ||
         t == DType::u16be || t == DType::u32be || t == DType::u64be;
}

enum class Found { dataset, missing, not_dataset, broken };

// What a reader following the path finds at dataset i.
Found find(const Model& m, int i) {
  const int g = dset_group[std::size_t(i)];
  if (g >= 0 && m.groups[std::size_t(g)] != GroupPlace::group &&
      m.groups[std::size_t(g)] != GroupPlace::soft_link) {
    return Found::missing; // no group, so nothing below it
  }
  switch (m.dsets[std::size_t(i)].place) {
  case Place::dataset:
  case Place::soft_link:
  case Place::hard_link: return Found::dataset;
  case Place::absent: return Found::missing;
  case Place::group:
  case Place::named_type:
  case Place::link_to_root: return Found::not_dataset;
  default: return Found::broken; // a link that leads nowhere
  }
}

struct Verdict {
  std::optional<io::DatasetInfo> info; // set when the file is valid
  std::string why;                     // else the first rule it breaks
};

Verdict judge(const Model& m) {
  Verdict v;
  auto refuse = [&](std::string why) {
    v.why = std::move(why);
    return v;
  };
  io::DatasetInfo info;
  info.path = input_name;
  const auto format = text_attr(m, a_format);
  if (format != std::string(io::dataset_format)) return refuse("format is not gridlm-tokens");
  const auto version = integer_attr(m, a_version);
  if (version != io::dataset_format_version) return refuse("format_version is not 1");
  info.format_version = *version;
  const auto vocab = integer_attr(m, a_vocab);
  if (!vocab || *vocab < 1 || *vocab > std::numeric_limits<std::int32_t>::max()) {
    return refuse("vocab_size is not an integer from 1 to 2^31 - 1");
  }
  info.vocab_size = *vocab;
  std::int64_t* ids[] = {&info.bos_id, &info.eos_id, &info.unk_id, &info.pad_id};
  for (int k = 0; k < 4; ++k) {
    const auto id = integer_attr(m, a_bos + k);
    if (!id || *id < -1 || *id >= *vocab) {
      return refuse(fmt::format("{} is not an integer from -1 to vocab_size - 1",
                                attr_names[std::size_t(a_bos + k)]));
    }
    *ids[k] = *id;
  }
  std::uint64_t* counts[] = {&info.tokens, &info.documents, &info.valid_tokens,
                             &info.valid_documents};
  for (int k = 0; k < 4; ++k) {
    const auto c = integer_attr(m, a_tokens + k);
    if (!c || *c < 0) {
      return refuse(
          fmt::format("{} is not an integer >= 0", attr_names[std::size_t(a_tokens + k)]));
    }
    *counts[k] = std::uint64_t(*c);
  }
  const auto tokenizer = text_attr(m, a_tokenizer), created_by = text_attr(m, a_created_by);
  if (!tokenizer || !created_by) return refuse("tokenizer or created_by is not a string");
  info.tokenizer = *tokenizer;
  info.created_by = *created_by;

  // A 1-D dataset of unsigned integers of one of these widths and n elements.
  auto check = [&](int i, const std::vector<int>& widths, std::uint64_t n) -> std::string {
    const std::string name =
        dset_group[std::size_t(i)] < 0
            ? fmt::format("/{}", dset_leaf[std::size_t(i)])
            : fmt::format("/{}/{}", group_names[std::size_t(dset_group[std::size_t(i)])],
                          dset_leaf[std::size_t(i)]);
    const Dset& d = m.dsets[std::size_t(i)];
    switch (find(m, i)) {
    case Found::missing: return name + " is missing";
    case Found::not_dataset: return name + " is not a dataset";
    case Found::broken: return name + " is a link that leads nowhere";
    case Found::dataset: break;
    }
    if (!is_unsigned_integer(d.type) ||
        std::find(widths.begin(), widths.end(), element_bytes(d.type)) == widths.end()) {
      return name + " has the wrong type";
    }
    if (d.shape != Shape::one_d) return name + " is not 1-D";
    if (d.n != n) return fmt::format("{} has {} elements, not {}", name, d.n, n);
    return "";
  };
  const bool wide = *vocab > io::narrow_vocab_limit;
  const std::vector<int> token_widths = wide ? std::vector<int>{4} : std::vector<int>{2, 4};
  for (const std::string& why :
       {check(d_tokens, token_widths, info.tokens), check(d_offsets, {8}, info.documents + 1),
        check(d_valid_tokens, token_widths, info.valid_tokens),
        check(d_valid_offsets, {8}, info.valid_documents + 1)}) {
    if (!why.empty()) return refuse(why);
  }
  const Dset& model = m.dsets[d_model];
  if (const std::string why = check(d_model, {1}, model.n); !why.empty()) return refuse(why);
  if (model.n == 0) return refuse("/tokenizer/model is empty");
  info.token_bytes = element_bytes(m.dsets[d_tokens].type);
  v.info = info;
  return v;
}

// ---------------------------------------------------------------------------------------------
// Building the file.

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
struct ImageCapture {
  std::size_t size = 0;
  std::vector<char> image;
};
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

// The file, in memory and open. The reader is given it as it is: closing it and opening its
// image again, as a reader on disk would, would double the time of an input (most of it HDF5
// setting up a metadata cache for each open) for no difference to what the reader sees.
H5Handle build(const Model& m, ImageCapture* capture = nullptr) {
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

// ---------------------------------------------------------------------------------------------
// Describing a description, for reports.

constexpr std::array<const char*, int(AttrType::count)> attr_type_names = {
    "int64",
    "int64 big-endian",
    "int32",
    "uint64",
    "uint8",
    "int8",
    "uint16 big-endian",
    "float64",
    "float32",
    "UTF-8 string",
    "ASCII string",
    "fixed string (NUL-terminated)",
    "fixed string (NUL-padded)",
    "enum of int64",
    "array of one int64"};
constexpr std::array<const char*, int(AttrSpace::count)> attr_space_names = {
    "scalar", "[1]", "[1][1]", "[2]", "null space", "[0]"};
constexpr std::array<const char*, int(Place::count)> place_names = {
    "dataset",
    "absent",
    "group",
    "soft link to a dataset",
    "hard link to a dataset",
    "dangling soft link",
    "soft link to itself",
    "external link to a missing file",
    "named datatype",
    "soft link to the root group"};
constexpr std::array<const char*, int(DType::count)> dtype_names = {"uint16",
                                                                    "uint32",
                                                                    "uint64",
                                                                    "uint8",
                                                                    "int16",
                                                                    "int32",
                                                                    "int64",
                                                                    "uint16 big-endian",
                                                                    "uint32 big-endian",
                                                                    "uint64 big-endian",
                                                                    "float32",
                                                                    "float64",
                                                                    "fixed string",
                                                                    "enum of uint16",
                                                                    "16-bit bitfield"};
constexpr std::array<const char*, int(Shape::count)> shape_names = {"1-D", "scalar", "null space",
                                                                    "n x 1", "1 x n"};
constexpr std::array<const char*, int(Layout::count)> layout_names = {
    "contiguous", "chunked", "chunked, extendible", "chunked, deflate", "compact"};
constexpr std::array<const char*, int(GroupPlace::count)> group_place_names = {
    "group", "absent", "dataset", "soft link to a group", "dangling soft link", "named datatype"};

std::string describe(const Model& m) {
  std::string out = fmt::format("  {} operations; {} object formats\n  attributes of /:\n", m.ops,
                                m.latest_format ? "latest" : "earliest");
  for (const Attr& a : m.attrs) {
    if (!a.present) {
      out += fmt::format("    {}: absent\n", a.name);
      continue;
    }
    const std::string value =
        is_string(a.type) ? fmt::format("\"{}\"", a.text) : std::to_string(a.value);
    out += fmt::format("    {}: {} {} = {}\n", a.name, attr_space_names[std::size_t(a.space)],
                       attr_type_names[std::size_t(a.type)], value);
  }
  for (int g = 0; g < group_count; ++g) {
    out += fmt::format("  /{}: {}\n", group_names[std::size_t(g)],
                       group_place_names[std::size_t(m.groups[std::size_t(g)])]);
  }
  for (int i = 0; i < dset_count; ++i) {
    const Dset& d = m.dsets[std::size_t(i)];
    const int g = dset_group[std::size_t(i)];
    out += fmt::format("  {}/{}: {}, {} {} of {} elements, {}\n",
                       g >= 0 ? fmt::format("/{}", group_names[std::size_t(g)]) : "",
                       dset_leaf[std::size_t(i)], place_names[std::size_t(d.place)],
                       shape_names[std::size_t(d.shape)], dtype_names[std::size_t(d.type)], d.n,
                       layout_names[std::size_t(d.layout)]);
  }
  for (const Extra& e : m.extras)
    out += fmt::format("  extra object /extra_{}_{}\n", e.kind, e.slot);
  return out;
}

std::string describe(const io::DatasetInfo& i) {
  return fmt::format("format_version {}, vocab_size {}, ids {} {} {} {}, tokens {} in {} "
                     "documents, valid {} in {}, token_bytes {}, tokenizer \"{}\", created_by "
                     "\"{}\"",
                     i.format_version, i.vocab_size, i.bos_id, i.eos_id, i.unk_id, i.pad_id,
                     i.tokens, i.documents, i.valid_tokens, i.valid_documents, i.token_bytes,
                     i.tokenizer, i.created_by);
}

// ---------------------------------------------------------------------------------------------
// The property.

// HDF5 calls the automatic error handler when an API call fails; the default one prints the
// error stack on stderr. Counting those calls tells whether anything would have been printed.
// gridlm turns the handler off once per process (io::detail::quiet_hdf5_errors), so the counter
// stands in for the default one only until then.
int hdf5_failures = 0;
herr_t count_failure(hid_t, void*) {
  ++hdf5_failures;
  return 0;
}

[[noreturn]] void violated(const Model& m, const std::string& what) {
  std::fprintf(stderr, "\nread_dataset_info property violated: %s\nThe file:\n%s\n", what.c_str(),
               describe(m).c_str());
  std::fflush(stderr);
  std::abort();
}

} // namespace

Outcome check_dataset_structure(const std::uint8_t* data, std::size_t size) {
  const Model m = decode(data, size);
  const Verdict want = judge(m);
  const H5Handle file = build(m);
  const ssize_t open_before = H5Fget_obj_count(file.get(), H5F_OBJ_ALL);

  // In place of HDF5's default handler, which prints the error stack on stderr, while it is on:
  // read_dataset_info may be a program's first gridlm call, and must then turn it off before
  // any of its HDF5 calls fails.
  H5E_auto2_t handler = nullptr;
  void* handler_data = nullptr;
  MUST(H5Eget_auto2(H5E_DEFAULT, &handler, &handler_data));
  if (handler != nullptr) MUST(H5Eset_auto2(H5E_DEFAULT, count_failure, nullptr));
  hdf5_failures = 0;
  Outcome out;
  std::optional<io::DatasetInfo> got;
  try {
    got = io::read_dataset_info(file.get(), input_name);
  } catch (const Error& e) {
    out.error = e.what();
  } catch (const std::exception& e) {
    violated(m, fmt::format("threw an exception that is not gridlm::Error: {}", e.what()));
  } catch (...) {
    violated(m, "threw something that is not an exception");
  }
  const int failures = hdf5_failures;
  hdf5_failures = 0;

  if (failures > 0) {
    violated(m, fmt::format("HDF5 printed {} error stack(s) on stderr ({})", failures,
                            got ? "it accepted the file" : "error: " + out.error));
  }
  MUST(H5Eget_auto2(H5E_DEFAULT, &handler, &handler_data));
  if (handler != nullptr) {
    violated(m, "it left HDF5's automatic error printing on: later failing HDF5 calls would "
                "print their error stacks on stderr");
  }
  const ssize_t open_after = H5Fget_obj_count(file.get(), H5F_OBJ_ALL);
  if (open_after != open_before) {
    violated(m, fmt::format("{} HDF5 objects were open in the file before it, {} after",
                            open_before, open_after));
  }
  if (!got) {
    if (want.info) violated(m, "refused a valid file: " + out.error);
    if (out.error.find(fmt::format("'{}'", input_name)) == std::string::npos) {
      violated(m, "its error does not name the file: " + out.error);
    }
    return out;
  }
  out.accepted = true;
  if (!want.info) violated(m, "accepted a file that breaks the format: " + want.why);
  const io::DatasetInfo& i = *got;
  const io::DatasetInfo& w = *want.info;
  const bool same = i.path == w.path && i.format_version == w.format_version &&
                    i.vocab_size == w.vocab_size && i.bos_id == w.bos_id && i.eos_id == w.eos_id &&
                    i.unk_id == w.unk_id && i.pad_id == w.pad_id && i.tokens == w.tokens &&
                    i.documents == w.documents && i.valid_tokens == w.valid_tokens &&
                    i.valid_documents == w.valid_documents && i.token_bytes == w.token_bytes &&
                    i.tokenizer == w.tokenizer && i.created_by == w.created_by;
  if (!same) {
    violated(m, fmt::format("it returned {}\nwhere the file says {}", describe(i), describe(w)));
  }
  // What it reports agrees with the datasets themselves, whatever the attributes say.
  if (i.tokens != m.dsets[d_tokens].n || i.documents + 1 != m.dsets[d_offsets].n ||
      i.valid_tokens != m.dsets[d_valid_tokens].n ||
      i.valid_documents + 1 != m.dsets[d_valid_offsets].n ||
      (i.token_bytes != 2 && i.token_bytes != 4) ||
      (i.vocab_size > io::narrow_vocab_limit && i.token_bytes != 4)) {
    violated(m, "its counts or token width disagree with the datasets: " + describe(i));
  }
  return out;
}

std::vector<std::pair<std::string, Bytes>> seed_inputs() {
  // Shaped as prepare-data writes a small corpus: SentencePiece's ids (unk 0, bos 1, eos 2,
  // no pad), a fifth of the documents in the validation split.
  Header synthetic;
  synthetic.vocab = 300;
  synthetic.ids = {1, 2, 0, -1};
  synthetic.tokens = 4021;
  synthetic.documents = 24;
  synthetic.valid_tokens = 1013;
  synthetic.valid_documents = 6;
  synthetic.model_bytes = 5873;
  synthetic.tokenizer = "trained here: BPE, 300 pieces, on tests/cli/corpus";
  synthetic.created_by = "gridlm prepare-data --vocab-size 300 --valid-fraction 0.2";

  Header no_valid = synthetic;
  no_valid.valid_tokens = no_valid.valid_documents = 0;
  Header wide = synthetic;
  wide.vocab = 70000;
  Header at_limit = synthetic; // the largest vocabulary stored as uint16, and as uint32
  at_limit.vocab = io::narrow_vocab_limit;
  Header at_limit_wide = at_limit;
  at_limit_wide.wide_tokens = true;
  Header tiny; // one token, one document, no tokenizer ids
  tiny.tokens = 1;
  tiny.documents = 1;
  Header latest = synthetic;
  latest.latest_format = true;

  // The synthetic file with operations appended, each its opcode and argument bytes.
  auto with = [&](std::initializer_list<std::vector<int>> ops) {
    Bytes in = write_header(synthetic);
    for (const std::vector<int>& op : ops)
      in.insert(in.end(), op.begin(), op.end());
    return in;
  };
  // Still valid: links the reader follows, other layouts and types, objects it ignores.
  const Bytes varied = with({{op_group, g_valid, int(GroupPlace::soft_link)},
                             {op_place, d_model, int(Place::hard_link)},
                             {op_place, d_offsets, int(Place::soft_link)},
                             {op_layout, d_tokens, int(Layout::compact)},
                             {op_layout, d_valid_tokens, int(Layout::deflate)},
                             {op_type, d_tokens, int(DType::u16be)},
                             {op_extra, 0, 1},   // a dataset
                             {op_extra, 2, 0},   // a group with a 'format' attribute
                             {op_extra, 3, 3}}); // a dangling link

  return {
      {"valid-synthetic", write_header(synthetic)},
      {"valid-no-validation-split", write_header(no_valid)},
      {"valid-uint32-vocabulary", write_header(wide)},
      {"valid-uint16-vocabulary-limit", write_header(at_limit)},
      {"valid-uint32-vocabulary-limit", write_header(at_limit_wide)},
      {"valid-tiny", write_header(tiny)},
      {"valid-latest-hdf5-format", write_header(latest)},
      {"valid-links-layouts-extras", varied},
      // Faults the fuzzer found in the reader (now regression inputs): links that lead
      // nowhere where a dataset belongs, a dataset where a group belongs.
      {"refused-dangling-soft-link", with({{op_place, d_tokens, int(Place::dangling)}})},
      {"refused-soft-link-loop", with({{op_place, d_model, int(Place::loop)}})},
      {"refused-external-link-to-missing-file",
       with({{op_place, d_valid_offsets, int(Place::external)}})},
      {"refused-valid-group-is-a-dataset", with({{op_group, g_valid, int(GroupPlace::dataset)}})},
      // Two operations from a file that a missing check would accept (n_documents -1 and
      // no offsets at all): single operations from here reach it.
      {"refused-negative-document-count", with({{op_size, d_offsets, 2}, {op_sync_counts, 0}})}};
}

Bytes input_describing(const std::string& dataset_path) {
  H5Handle file(H5Fopen(dataset_path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file) throw Error(fmt::format("cannot open '{}' as an HDF5 file", dataset_path));
  const io::DatasetInfo info = io::read_dataset_info(file.get(), dataset_path);
  H5Handle model(H5Dopen2(file.get(), "/tokenizer/model", H5P_DEFAULT));
  H5Handle space(H5Dget_space(model.get()));
  Header h;
  h.wide_tokens = info.token_bytes == 4;
  h.vocab = info.vocab_size;
  h.ids = {info.bos_id, info.eos_id, info.unk_id, info.pad_id};
  h.tokens = info.tokens;
  h.documents = info.documents;
  h.valid_tokens = info.valid_tokens;
  h.valid_documents = info.valid_documents;
  h.model_bytes = std::uint64_t(H5Sget_simple_extent_npoints(space.get()));
  h.tokenizer = info.tokenizer;
  h.created_by = info.created_by;
  return write_header(h);
}

std::vector<Bytes> single_operations() {
  std::vector<Bytes> out;
  auto each = [&](int op, int targets, int choices) {
    for (int t = 0; t < targets; ++t) {
      if (choices == 0) out.push_back({std::uint8_t(op), std::uint8_t(t)});
      for (int c = 0; c < choices; ++c)
        out.push_back({std::uint8_t(op), std::uint8_t(t), std::uint8_t(c)});
    }
  };
  each(op_remove_attr, attr_count, 0);
  each(op_attr_type, attr_count, int(AttrType::count));
  each(op_attr_space, attr_count, int(AttrSpace::count));
  each(op_attr_int, attr_count, integer_choices);
  each(op_attr_text, attr_count, text_choices);
  each(op_place, dset_count, int(Place::count));
  each(op_type, dset_count, int(DType::count));
  each(op_shape, dset_count, int(Shape::count));
  each(op_layout, dset_count, int(Layout::count));
  each(op_size, dset_count, size_choices);
  each(op_content, dset_count, int(Content::count));
  each(op_group, group_count, int(GroupPlace::count));
  each(op_extra, extra_kinds, 4);
  each(op_sync_counts, 1, 0);
  return out;
}

std::vector<char> file_image(const std::uint8_t* data, std::size_t size) {
  ImageCapture capture;
  H5Handle file = build(decode(data, size), &capture);
  MUST(H5Fclose(file.get()));
  return std::move(capture.image);
}

std::string describe_input(const std::uint8_t* data, std::size_t size) {
  const Model m = decode(data, size);
  const Verdict v = judge(m);
  return describe(m) + (v.info ? "  valid\n" : "  invalid: " + v.why + "\n");
}

} // namespace gridlm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gridlm::fuzz::check_dataset_structure(data, size);
  return 0;
}
