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
// The parts: what an input means (dataset_input.cpp, into the description of
// dataset_model.hpp), which files are valid (dataset_judge.cpp), building the file
// (dataset_build.cpp) and describing it in reports (dataset_describe.cpp). This file holds the
// property and the functions of dataset_structure.hpp.
//
// The property, for every input: read_dataset_info either returns exactly what the file says,
// when the file is valid by docs/formats/dataset.md, or throws gridlm::Error naming the file.
// Which files are valid is decided by judge() (dataset_judge.cpp), a model of the documented
// rules written from the description, independently of the reader: a reader that skipped a
// check accepts a file judge() refuses, and the property fails. Besides, the reader must not
// crash (the fuzz build runs under ASan and UBSan), throw anything else, let HDF5 print an
// error stack on stderr (for a caller that left HDF5's printing on), or leave an HDF5 object
// open. A violation prints the file's description and aborts.
#include "tests/fuzz/dataset_structure.hpp"

#include <hdf5.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/dataset_writer.hpp"
#include "io/h5_handle.hpp"
#include "io/token_dataset.hpp"
#include "parallel/diagnostics.hpp"
#include "tests/fuzz/dataset_model.hpp"

namespace gridlm::fuzz {

using io::H5Handle;
using namespace detail;

namespace {

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
