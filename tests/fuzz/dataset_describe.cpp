// Describing a description in words: what the reports of a violated property show of the file,
// and what the replay driver's --describe prints.
#include "tests/fuzz/dataset_model.hpp"

#include <array>
#include <cstddef>
#include <string>

#include <fmt/format.h>

namespace gridlm::fuzz::detail {
namespace {

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

} // namespace

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

} // namespace gridlm::fuzz::detail
