// Judging a description by the documented format (docs/formats/dataset.md), as the reader is
// meant to. judge() is the fuzz target's own model of which files are valid and what reading
// them returns, written from the description and apart from the reader on purpose: a check
// the reader skipped then shows as a file it accepts and judge() refuses (the property:
// dataset_structure.cpp).
#include "tests/fuzz/dataset_model.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/dataset_writer.hpp"

namespace gridlm::fuzz::detail {

bool is_string(AttrType t) {
  return t == AttrType::vlen_utf8 || t == AttrType::vlen_ascii || t == AttrType::fixed_nullterm ||
         t == AttrType::fixed_nullpad;
}
bool one_element(AttrSpace s) {
  return s == AttrSpace::scalar || s == AttrSpace::one || s == AttrSpace::one_by_one;
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

namespace {

bool is_integer(AttrType t) {
  return t == AttrType::i64le || t == AttrType::i64be || t == AttrType::i32le ||
         t == AttrType::u64le || t == AttrType::u8 || t == AttrType::i8 || t == AttrType::u16be;
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

} // namespace

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

} // namespace gridlm::fuzz::detail
