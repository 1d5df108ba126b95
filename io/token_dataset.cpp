// Validation and reading of tokenized datasets.
#include "io/token_dataset.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "io/dataset_writer.hpp"
#include "io/h5_check.hpp"
#include "io/parallel_h5.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::io {
namespace {

constexpr const char* remake = "prepare the dataset again with gridlm prepare-data";

std::string type_text(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t bits = 8 * H5Tget_size(type);
  switch (cls) {
  case H5T_INTEGER:
    return fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
  case H5T_FLOAT: return fmt::format("float{}", bits);
  case H5T_STRING: return "string";
  default: return fmt::format("an HDF5 type of class {}", int(cls));
  }
}

// Whether `name` ("/valid/tokens") exists, each component in turn: H5Lexists fails, rather
// than answering no, when a parent group is missing.
bool exists(hid_t file, const std::string& name) {
  std::string::size_type slash = 0;
  while ((slash = name.find('/', slash + 1)) != std::string::npos) {
    if (H5Lexists(file, name.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0;
}

class Checker {
public:
  Checker(hid_t file, const std::string& path) : file_(file), path_(path) {}

  Error fail(const std::string& problem, const std::string& fix = remake) const {
    return Error(fmt::format("'{}' {}; {}", path_, problem, fix));
  }

  // A scalar attribute of the root of HDF5 type class `cls`, or an error saying what it is.
  H5Handle attribute(const char* name, H5T_class_t cls, const char* expected) const {
    if (H5Aexists(file_, name) <= 0) {
      throw fail(fmt::format("lacks the attribute '{}' that format version {} requires", name,
                             dataset_format_version));
    }
    H5Handle attr(GRIDLM_H5_CHECK(H5Aopen(file_, name, H5P_DEFAULT)));
    H5Handle type(GRIDLM_H5_CHECK(H5Aget_type(attr.get())));
    H5Handle space(GRIDLM_H5_CHECK(H5Aget_space(attr.get())));
    if (H5Tget_class(type.get()) != cls || H5Sget_simple_extent_npoints(space.get()) != 1) {
      throw fail(fmt::format("has an attribute '{}' of type {}{}, where the format has {}", name,
                             type_text(type.get()),
                             H5Sget_simple_extent_npoints(space.get()) != 1 ? " (not scalar)" : "",
                             expected));
    }
    return attr;
  }

  std::int64_t integer(const char* name) const {
    H5Handle attr = attribute(name, H5T_INTEGER, "an integer");
    std::int64_t value = 0;
    GRIDLM_H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_INT64, &value));
    return value;
  }

  std::string text(const char* name) const {
    H5Handle attr = attribute(name, H5T_STRING, "a string");
    H5Handle type(GRIDLM_H5_CHECK(H5Aget_type(attr.get())));
    if (GRIDLM_H5_CHECK(H5Tis_variable_str(type.get())) > 0) {
      char* value = nullptr;
      H5Handle memory(GRIDLM_H5_CHECK(H5Tcopy(H5T_C_S1)));
      GRIDLM_H5_CHECK(H5Tset_size(memory.get(), H5T_VARIABLE));
      // HDF5 converts no strings between character sets: read in the file's.
      GRIDLM_H5_CHECK(H5Tset_cset(memory.get(), H5Tget_cset(type.get())));
      GRIDLM_H5_CHECK(H5Aread(attr.get(), memory.get(), &value));
      std::string out = value != nullptr ? value : "";
      H5free_memory(value);
      return out;
    }
    std::string out(H5Tget_size(type.get()), '\0');
    GRIDLM_H5_CHECK(H5Aread(attr.get(), type.get(), out.data()));
    return out.substr(0, out.find('\0'));
  }

  // A 1-D dataset of integers; returns its size and element bytes.
  std::pair<std::uint64_t, std::size_t> integers(const std::string& name, bool want_unsigned,
                                                 const std::vector<std::size_t>& widths,
                                                 const char* expected) const {
    if (!exists(file_, name)) throw fail(fmt::format("has no dataset '{}'", name));
    // H5Lexists says yes to a link that leads nowhere (a dangling soft link, a loop, an
    // external link to a missing file): opening it is what fails.
    H5Handle object(H5Oopen(file_, name.c_str(), H5P_DEFAULT));
    if (!object) {
      throw fail(fmt::format("has '{}', a link that leads to no object (HDF5 says: {})", name,
                             detail::h5_error_detail()));
    }
    if (H5Iget_type(object.get()) != H5I_DATASET) {
      throw fail(fmt::format("has '{}', but it is not a dataset", name));
    }
    H5Handle type(GRIDLM_H5_CHECK(H5Dget_type(object.get())));
    const std::size_t width = H5Tget_size(type.get());
    const bool ok = H5Tget_class(type.get()) == H5T_INTEGER &&
                    (H5Tget_sign(type.get()) == H5T_SGN_NONE) == want_unsigned &&
                    std::find(widths.begin(), widths.end(), width) != widths.end();
    if (!ok) {
      throw fail(fmt::format("has a dataset '{}' of type {}, where the format has {}", name,
                             type_text(type.get()), expected));
    }
    H5Handle space(GRIDLM_H5_CHECK(H5Dget_space(object.get())));
    if (H5Sget_simple_extent_ndims(space.get()) != 1) {
      throw fail(fmt::format("has a dataset '{}' that is not 1-D", name));
    }
    hsize_t n = 0;
    GRIDLM_H5_CHECK(H5Sget_simple_extent_dims(space.get(), &n, nullptr));
    return {n, width};
  }

private:
  hid_t file_;
  const std::string& path_;
};

std::string read_model_bytes(hid_t file) {
  H5Handle dset(GRIDLM_H5_CHECK(H5Dopen2(file, "/tokenizer/model", H5P_DEFAULT)));
  H5Handle space(GRIDLM_H5_CHECK(H5Dget_space(dset.get())));
  std::string bytes(std::size_t(H5Sget_simple_extent_npoints(space.get())), '\0');
  GRIDLM_H5_CHECK(
      H5Dread(dset.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()));
  return bytes;
}

// Checks a path before HDF5 opens it, in words for datasets.
void check_readable(const std::string& path) {
  const std::string problem = hdf5_file_problem(path);
  if (problem.empty()) return;
  const bool missing = problem == "does not exist";
  throw Error(fmt::format("cannot read dataset '{}': it {}; {}", path, problem,
                          missing ? "make one with gridlm prepare-data"
                                  : "a gridlm dataset is one HDF5 file that gridlm prepare-data "
                                    "writes (a dataset in shards named by an index file is not "
                                    "supported yet)"));
}

} // namespace

DatasetInfo read_dataset_info(hid_t file, const std::string& path) {
  // Some checks are HDF5 calls that fail (H5Lexists below a dataset, H5Oopen of a broken link):
  // their error stacks must not reach stderr, whoever calls.
  detail::quiet_hdf5_errors();
  const Checker c(file, path);
  DatasetInfo info;
  info.path = path;
  if (H5Aexists(file, "format") <= 0) {
    throw c.fail("is not a gridlm token dataset: it has no 'format' attribute",
                 "make one with gridlm prepare-data");
  }
  const std::string format = c.text("format");
  if (format != dataset_format) {
    throw c.fail(fmt::format("is not a gridlm token dataset: its format is '{}', not '{}'", format,
                             dataset_format),
                 "give a file that gridlm prepare-data wrote");
  }
  info.format_version = c.integer("format_version");
  if (info.format_version > dataset_format_version) {
    throw c.fail(fmt::format("has format version {}, newer than this gridlm reads ({})",
                             info.format_version, dataset_format_version),
                 "use a newer gridlm, or " + std::string(remake));
  }
  if (info.format_version != dataset_format_version) {
    throw c.fail(fmt::format("has format version {}, which gridlm does not know (it reads {})",
                             info.format_version, dataset_format_version));
  }
  info.vocab_size = c.integer("vocab_size");
  if (info.vocab_size < 1 || info.vocab_size > std::numeric_limits<std::int32_t>::max()) {
    throw c.fail(fmt::format("has vocab_size {}, outside 1 to 2^31 - 1", info.vocab_size));
  }
  for (auto [name, field] : {std::pair{"bos_id", &info.bos_id},
                             {"eos_id", &info.eos_id},
                             {"unk_id", &info.unk_id},
                             {"pad_id", &info.pad_id}}) {
    *field = c.integer(name);
    if (*field < -1 || *field >= info.vocab_size) {
      throw c.fail(fmt::format("has {} = {}, neither -1 (none) nor a token id below vocab_size {}",
                               name, *field, info.vocab_size));
    }
  }
  auto count = [&](const char* name) {
    const std::int64_t v = c.integer(name);
    if (v < 0) throw c.fail(fmt::format("has a negative {} ({})", name, v));
    return std::uint64_t(v);
  };
  info.tokens = count("n_tokens");
  info.documents = count("n_documents");
  info.valid_tokens = count("valid_n_tokens");
  info.valid_documents = count("valid_n_documents");
  info.tokenizer = c.text("tokenizer");
  info.created_by = c.text("created_by");

  const bool wide = info.vocab_size > narrow_vocab_limit;
  const char* token_type = wide ? "uint32 (the vocabulary exceeds 65536)" : "uint16 or uint32";
  const std::vector<std::size_t> widths =
      wide ? std::vector<std::size_t>{4} : std::vector<std::size_t>{2, 4};
  for (const auto& [prefix, tokens, documents] :
       {std::tuple{"/", info.tokens, info.documents},
        std::tuple{"/valid/", info.valid_tokens, info.valid_documents}}) {
    const std::string tname = std::string(prefix) + "tokens";
    const std::string oname = std::string(prefix) + "doc_offsets";
    const auto [n, width] = c.integers(tname, /*want_unsigned=*/true, widths, token_type);
    if (n != tokens) {
      throw c.fail(fmt::format("has {} tokens in '{}' but its attributes say {}: the file is "
                               "inconsistent (an interrupted or altered write)",
                               n, tname, tokens));
    }
    if (tname == "/tokens") info.token_bytes = int(width);
    const auto offsets = c.integers(oname, /*want_unsigned=*/true, {8}, "uint64").first;
    if (offsets != documents + 1) {
      throw c.fail(fmt::format("has {} entries in '{}', where {} documents need {}", offsets, oname,
                               documents, documents + 1));
    }
  }
  if (c.integers("/tokenizer/model", /*want_unsigned=*/true, {1},
                 "uint8 (the SentencePiece model's bytes)")
          .first == 0) {
    throw c.fail("has an empty '/tokenizer/model'");
  }
  return info;
}

Tokenizer load_dataset_tokenizer(const std::string& path) {
  check_readable(path); // quiets HDF5 before its first call
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file) {
    throw Error(fmt::format("cannot open '{}': it is damaged or incomplete (HDF5 says: {}); {}",
                            path, detail::h5_error_detail(), remake));
  }
  read_dataset_info(file.get(), path);
  return Tokenizer::from_bytes(read_model_bytes(file.get()),
                               fmt::format("the tokenizer stored in '{}'", path));
}

TokenDataset::TokenDataset(MPI_Comm comm, const std::string& path,
                           const TokenDatasetOptions& options)
    : options_(options) {
  parallel::run_agreed(comm, [&] {
    if (options.sample_length < 2) {
      throw Error(fmt::format("a sample needs at least 2 tokens, not {}", options.sample_length));
    }
    check_readable(path);
  });
  // The file as found before the collective open, and again after the sample handle's open: a
  // file replaced in between (prepare-data renames a new one into place) would be checked as one
  // file and read as another. The open synchronises the ranks, so no rank can see only the new
  // file while another sees only the old.
  const Identity before = identity_of(path);
  file_.emplace(ParallelFile::open_read(comm, path));
  parallel::run_agreed(comm, [&] {
    info_ = read_dataset_info(file_->id(), path);
    Tokenizer t = Tokenizer::from_bytes(read_model_bytes(file_->id()),
                                        fmt::format("the tokenizer stored in '{}'", path));
    if (t.vocab_size() != info_.vocab_size) {
      throw Error(fmt::format("'{}' stores a tokenizer of {} pieces but says vocab_size {}; {}",
                              path, t.vocab_size(), info_.vocab_size, remake));
    }
    const bool train = options.split == Split::train;
    tokens_name_ = train ? "/tokens" : "/valid/tokens";
    offsets_name_ = train ? "/doc_offsets" : "/valid/doc_offsets";
    tokens_ = train ? info_.tokens : info_.valid_tokens;
    documents_ = train ? info_.documents : info_.valid_documents;
    if (!train && documents_ == 0) {
      throw Error(fmt::format("'{}' has no validation split (0 documents); prepare it with "
                              "gridlm prepare-data --valid-fraction F, or set train.eval_every = 0 "
                              "to train without validation",
                              path));
    }
    if (tokens_ < std::uint64_t(options.sample_length)) {
      throw Error(fmt::format(
          "'{}' holds {} tokens in its {} split, fewer than one sample of {} (model.seq_len + 1); "
          "{}",
          path, tokens_, train ? "training" : "validation", options.sample_length,
          train ? "lower model.seq_len (for a new run) or prepare more text"
                : "prepare it again with a larger --valid-fraction or more text, or set "
                  "train.eval_every = 0 to train without validation"));
    }
    order_.emplace((tokens_ - 1) / std::uint64_t(options.sample_length - 1), options.seed);
    // Sample reads go through a second, POSIX (sec2) handle of this rank's own: they need no
    // MPI, so a prefetch thread may make them while the main thread communicates.
    opened_ = identity_of(path);
    local_file_ = H5Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!local_file_) {
      throw Error(fmt::format("cannot open '{}' for reading samples (HDF5 says: {}); on {}", path,
                              detail::h5_error_detail(), where()));
    }
    tokens_dataset_ =
        H5Handle(GRIDLM_H5_CHECK(H5Dopen2(local_file_.get(), tokens_name_.c_str(), H5P_DEFAULT)));
    if (!(identity_of(path) == before)) {
      throw Error(fmt::format("'{}' changed while the job opened it (replaced or written to): "
                              "run the job again once the file is complete; on {}",
                              path, where()));
    }
  });
  if (options.check_token_ids) check_token_ids(comm);
}

void TokenDataset::check_token_ids(MPI_Comm comm) const {
  const int rank = parallel::comm_rank(comm), size = parallel::comm_size(comm);
  const auto cut = [&](std::uint64_t n, int r) { return part_begin(n, r, size); };
  // Per rank: bad token count, first bad token, largest id; first bad document offset. Signed,
  // with INT64_MAX for "none": MPICH 4.0's MPI_MIN on MPI_UINT64_T compares as signed.
  constexpr std::int64_t none = INT64_MAX;
  std::int64_t bad = 0, first_bad = none, largest = 0, bad_offset = none;
  parallel::run_agreed(comm, [&] {
    std::vector<std::uint32_t> block(std::size_t(1) << 20);
    for (std::uint64_t at = cut(tokens_, rank), end = cut(tokens_, rank + 1); at < end;) {
      const std::uint64_t n = std::min<std::uint64_t>(block.size(), end - at);
      file_->read(tokens_name_, at, Span<std::uint32_t>(block.data(), n), Transfer::independent);
      for (std::uint64_t i = 0; i < n; ++i) {
        largest = std::max<std::int64_t>(largest, block[i]);
        if (block[i] >= std::uint64_t(info_.vocab_size)) {
          first_bad = std::min(first_bad, std::int64_t(at + i));
          ++bad;
        }
      }
      at += n;
    }
    // Offsets: this rank's share and the entry before it, non-decreasing from 0 to tokens_; in
    // blocks, as the tokens (a corpus of 10^8 documents has 0.8 GB of them), each compared with
    // the last of the block before.
    std::uint64_t at = cut(documents_ + 1, rank), end = cut(documents_ + 1, rank + 1);
    if (at > 0) --at;
    std::vector<std::uint64_t> offsets(std::size_t(1) << 17);
    std::uint64_t previous = 0;
    for (const std::uint64_t first = at; at < end;) {
      const std::uint64_t n = std::min<std::uint64_t>(offsets.size(), end - at);
      file_->read(offsets_name_, at, Span<std::uint64_t>(offsets.data(), n), Transfer::independent);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t d = at + i;
        const bool ok = offsets[i] <= tokens_ && (d == first || offsets[i] >= previous) &&
                        (d != 0 || offsets[i] == 0) && (d != documents_ || offsets[i] == tokens_);
        if (!ok) bad_offset = std::min(bad_offset, std::int64_t(d));
        previous = offsets[i];
      }
      at += n;
    }
  });
  std::int64_t sums[1] = {bad}, mins[2] = {first_bad, bad_offset}, maxs[1] = {largest};
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 1, MPI_INT64_T, MPI_SUM, comm));
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mins, 2, MPI_INT64_T, MPI_MIN, comm));
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, maxs, 1, MPI_INT64_T, MPI_MAX, comm));
  parallel::run_agreed(comm, [&] {
    if (sums[0] > 0) {
      throw Error(fmt::format("'{}' holds {} token ids >= its vocab_size {} in '{}' (the first "
                              "at token {}, the largest {}): the tokens do not belong to its "
                              "tokenizer; {}",
                              info_.path, sums[0], info_.vocab_size, tokens_name_, mins[0], maxs[0],
                              remake));
    }
    if (mins[1] != none) {
      throw Error(fmt::format("'{}' has a bad entry {} in '{}': document offsets must rise from "
                              "0 to the token count {}; {}",
                              info_.path, mins[1], offsets_name_, tokens_, remake));
    }
  });
}

void TokenDataset::read_tokens(std::uint64_t offset, std::int32_t* out, std::uint64_t count) const {
  if (offset + count > tokens_) {
    throw Error(fmt::format("read of tokens [{}, {}) of '{}' is outside its {} tokens; on {}",
                            offset, offset + count, info_.path, tokens_, where()));
  }
  H5Handle file_space(GRIDLM_H5_CHECK(H5Dget_space(tokens_dataset_.get())));
  const hsize_t start = offset, n = count;
  GRIDLM_H5_CHECK(
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr));
  H5Handle mem_space(GRIDLM_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  GRIDLM_H5_CHECK(H5Dread(tokens_dataset_.get(), H5T_NATIVE_INT32, mem_space.get(),
                          file_space.get(), H5P_DEFAULT, out));
}

void TokenDataset::sample(std::int32_t* out, std::uint64_t index, int length) const {
  if (length != options_.sample_length) {
    throw Error(fmt::format("sample of {} tokens asked from '{}', opened for samples of {}", length,
                            info_.path, options_.sample_length));
  }
  const std::uint64_t offset = sample_offset(index);
  try {
    read_tokens(offset, out, std::uint64_t(length));
  } catch (const std::exception& e) {
    // A read that fails on a file damaged since it was opened is reported as that damage.
    check_unchanged(nullptr, 0, true);
    throw Error(fmt::format("cannot read sample {} (tokens [{}, {})) of '{}': {}. The file is "
                            "unchanged since the job opened it: check the file system, then "
                            "resume from the newest checkpoint with --resume auto",
                            index, offset, offset + std::uint64_t(length), info_.path, e.what()));
  }
  check_unchanged(out, length, false);
}

TokenDataset::Identity TokenDataset::identity_of(const std::string& path) {
  struct stat st {};
  Identity id;
  if (stat(path.c_str(), &st) != 0) return id; // gone: compares unequal to what was opened
  id.device = st.st_dev;
  id.inode = st.st_ino;
  id.size = static_cast<unsigned long long>(st.st_size);
  id.modified_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return id;
}

void TokenDataset::check_unchanged(const std::int32_t* sample, int length, bool now_too) const {
  // The sample's ids every time; the file's identity at most once a second (every rank's stat of
  // one file, per sample, loads a parallel file system's metadata server), and at once for a
  // sample that looks damaged: one that ends in zeros (what HDF5 reads past a file's end, so a
  // cut file is not trained on for that second) or holds an id outside the vocabulary (bytes
  // written over), so that a changed file is named as changed.
  int bad = -1;
  for (int i = 0; bad < 0 && i < length; ++i)
    if (sample[i] < 0 || sample[i] >= std::int32_t(info_.vocab_size)) bad = i;
  const bool zeros = length >= 2 && sample[length - 1] == 0 && sample[length - 2] == 0;
  const long long clock = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
  const bool stat_now = now_too || bad >= 0 || zeros || clock >= next_stat_ns_;
  if (stat_now) next_stat_ns_ = clock + 1000000000LL;
  const Identity now = stat_now ? identity_of(info_.path) : opened_;
  std::string what;
  if (now.inode == 0) {
    what = "it is gone (removed or renamed)";
  } else if (now.device != opened_.device || now.inode != opened_.inode) {
    what = "another file has taken its name";
  } else if (now.size != opened_.size) {
    what = fmt::format("its size went from {} to {} bytes", opened_.size, now.size);
  } else if (now.modified_ns != opened_.modified_ns) {
    what = "it was written to (its modification time changed; `touch` does that too, and then "
           "resuming as it is is enough)";
  } else if (bad >= 0) {
    what = fmt::format("it holds token id {}, outside its vocabulary of {}", sample[bad],
                       info_.vocab_size);
  }
  if (what.empty()) return;
  throw Error(fmt::format("dataset '{}' changed while the job ran: {}; the samples read from it "
                          "are no longer the ones checked at the start. Restore the file (or "
                          "prepare it again) and resume from the newest checkpoint with --resume "
                          "auto; on {}",
                          info_.path, what, where()));
}

std::vector<std::uint64_t> TokenDataset::read_document_offsets(std::uint64_t first,
                                                               std::uint64_t count) const {
  std::vector<std::uint64_t> out(count);
  file_->read(offsets_name_, first, Span<std::uint64_t>(out), Transfer::independent);
  return out;
}

Tokenizer TokenDataset::tokenizer() const {
  return Tokenizer::from_bytes(read_model_bytes(file_->id()),
                               fmt::format("the tokenizer stored in '{}'", info_.path));
}

std::string TokenDataset::describe() const {
  return fmt::format("dataset '{}' ({} split): {} tokens in {} documents, vocabulary {}; {} "
                     "samples of {} tokens per epoch, order seed {}",
                     info_.path, options_.split == Split::train ? "training" : "validation",
                     tokens_, documents_, info_.vocab_size, num_samples(), options_.sample_length,
                     options_.seed);
}

} // namespace gridlm::io
