// The inputs of the dataset-structure fuzz target: their bytes, and decoding them into the
// description of a file (dataset_model.hpp).
//
// Input layout: a header describing a valid file (vocabulary, special ids, split sizes,
// tokenizer model size, two strings), then operations until the input ends, each one byte of
// opcode and its arguments, that damage or vary it. An input with no operations is a valid
// file; bytes past the end read as zero, so every byte string decodes to something.
#include "tests/fuzz/dataset_model.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "io/dataset_writer.hpp"

namespace gridlm::fuzz::detail {
namespace {

// Sizes stay below 2^40 elements: large enough for counts far beyond any real file, small
// enough that no size computation overflows.
constexpr std::uint64_t max_elements = std::uint64_t(1) << 40;

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
// Decoding: the header's valid file, then the operations that damage or vary it.

template <class E>
E pick(Reader& r) {
  return E(r.byte() % std::uint8_t(E::count));
}

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

} // namespace

Bytes write_header(const Header& h) {
  Writer w;
  w.byte((h.wide_tokens ? 1 : 0) | (h.latest_format ? 2 : 0)).varint(std::uint64_t(h.vocab - 1));
  for (std::int64_t id : h.ids)
    w.varint(std::uint64_t(id + 1));
  w.varint(h.tokens).varint(h.documents).varint(h.valid_tokens).varint(h.valid_documents);
  w.varint(h.model_bytes - 1).text(h.tokenizer).text(h.created_by);
  return w.out;
}

namespace {

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

} // namespace

Model decode(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  Model m = model_of(read_header(r));
  while (!r.done())
    apply(m, r);
  return m;
}

} // namespace gridlm::fuzz::detail
