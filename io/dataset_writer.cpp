// The collective write of a tokenized dataset.
#include "io/dataset_writer.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "gridlm/version.hpp"
#include "io/direct_file.hpp"
#include "io/parallel_h5.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/fault_injection.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::io {

DatasetHeader header_for_tokenizer(const Tokenizer& tokenizer) {
  DatasetHeader h;
  h.vocab_size = tokenizer.vocab_size();
  h.bos_id = tokenizer.bos_id();
  h.eos_id = tokenizer.eos_id();
  h.unk_id = tokenizer.unk_id();
  h.pad_id = tokenizer.pad_id();
  h.tokenizer_model = tokenizer.model_bytes();
  return h;
}
namespace {

constexpr std::uint64_t token_chunk = 1 << 20; // elements: 2-4 MiB, a good MPI-IO request

struct Counts {
  std::uint64_t tokens = 0, documents = 0; // this rank's
  std::uint64_t token_offset = 0, doc_offset = 0;
  std::uint64_t total_tokens = 0, total_documents = 0;
};

// Where this rank's part of a split goes, from every rank's sizes.
Counts place(MPI_Comm comm, const SplitPart& part) {
  const int rank = parallel::comm_rank(comm), size = parallel::comm_size(comm);
  const std::uint64_t mine[2] = {part.tokens.size(), part.doc_tokens.size()};
  std::vector<std::uint64_t> all(2 * std::size_t(size));
  GRIDLM_MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm));
  Counts c;
  c.tokens = mine[0];
  c.documents = mine[1];
  for (int r = 0; r < size; ++r) {
    if (r < rank) {
      c.token_offset += all[2 * r];
      c.doc_offset += all[2 * r + 1];
    }
    c.total_tokens += all[2 * r];
    c.total_documents += all[2 * r + 1];
  }
  return c;
}

// Runs one collective step of the write; a failure is noted, not thrown (write_token_dataset).
using Attempt = std::function<void(const std::function<void()>&)>;

void write_split(ParallelFile& f, MPI_Comm comm, const std::string& group, const SplitPart& part,
                 const Counts& c, const Attempt& attempt) {
  const std::string tokens = group + "tokens", offsets = group + "doc_offsets";
  // Small splits get one chunk of their own size, not a mostly empty 2 MiB one.
  const auto chunk = [](std::uint64_t n, std::uint64_t most) {
    return std::min(most, std::max<std::uint64_t>(n, 1));
  };
  attempt([&] {
    if (part.tokens.wide()) {
      f.write(tokens, c.total_tokens, c.token_offset,
              Span<const std::uint32_t>(part.tokens.wide_tokens()),
              chunk(c.total_tokens, token_chunk));
    } else {
      f.write(tokens, c.total_tokens, c.token_offset,
              Span<const std::uint16_t>(part.tokens.narrow_tokens()),
              chunk(c.total_tokens, token_chunk));
    }
  });
  // Each rank writes the start of each of its documents; the last rank also the end of all.
  const bool last = parallel::comm_rank(comm) == parallel::comm_size(comm) - 1;
  std::vector<std::uint64_t> starts;
  starts.reserve(part.doc_tokens.size() + 1);
  std::uint64_t at = c.token_offset;
  for (std::uint64_t n : part.doc_tokens) {
    starts.push_back(at);
    at += n;
  }
  if (last) starts.push_back(c.total_tokens);
  attempt([&] {
    f.write(offsets, c.total_documents + 1, c.doc_offset, Span<const std::uint64_t>(starts),
            chunk(c.total_documents + 1, token_chunk / 4));
  });
  attempt([&] {
    f.write_attribute(tokens, "description",
                      std::string("token ids of the documents back to back, each document ended "
                                  "by eos_id (when the tokenizer has one); read with doc_offsets"));
  });
  attempt([&] {
    f.write_attribute(offsets, "description",
                      std::string("document d is tokens[doc_offsets[d]:doc_offsets[d+1]]"));
  });
}

// The tokenizer and the attributes: every rank takes part, rank 0's bytes are written.
void write_header(ParallelFile& f, const DatasetHeader& header, const Counts& t, const Counts& v,
                  bool root, const Attempt& attempt) {
  const std::string& model = header.tokenizer_model;
  attempt([&] {
    f.write("/tokenizer/model", model.size(), 0,
            root ? Span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(model.data()),
                                            model.size())
                 : Span<const std::uint8_t>(),
            0);
  });
  const std::pair<const char*, std::int64_t> ints[] = {
      {"format_version", dataset_format_version},
      {"vocab_size", header.vocab_size},
      {"bos_id", header.bos_id},
      {"eos_id", header.eos_id},
      {"unk_id", header.unk_id},
      {"pad_id", header.pad_id},
      {"n_tokens", std::int64_t(t.total_tokens)},
      {"n_documents", std::int64_t(t.total_documents)},
      {"valid_n_tokens", std::int64_t(v.total_tokens)},
      {"valid_n_documents", std::int64_t(v.total_documents)},
      {"seed", std::int64_t(header.seed)}};
  for (const auto& a : ints) // not a structured binding: C++17 lambdas cannot capture one
    attempt([&] { f.write_attribute("/", a.first, a.second); });
  const std::pair<const char*, std::string> texts[] = {
      {"format", dataset_format},
      {"tokenizer", header.tokenizer},
      {"created_by", header.created_by},
      {"gridlm_version", build::version},
      {"description", "gridlm tokenized dataset (docs/formats/dataset.md): /tokens and "
                      "/doc_offsets hold the training split, /valid/* the validation split, "
                      "/tokenizer/model the tokenizer"}};
  for (const auto& a : texts)
    attempt([&] { f.write_attribute("/", a.first, a.second); });
  attempt([&] { f.write_attribute("/", "valid_fraction", header.valid_fraction); });
  attempt([&] {
    f.write_attribute("/tokenizer/model", "description",
                      std::string("SentencePiece model (serialized ModelProto): "
                                  "sentencepiece.SentencePieceProcessor(model_proto=bytes(...))"));
  });
}

// Bytes per token id in the file (uint16 or uint32, as the tokens were kept).
std::uint64_t part_bytes(const SplitPart& part) { return part.tokens.wide() ? 4 : 2; }

// Before anything is written: the file fits its file system (rank 0's estimate, agreed), so
// that the common failure, a full disk, is named up front with what it needs.
void check_space(MPI_Comm comm, const std::string& path, const Counts& t, const Counts& v,
                 std::uint64_t token_bytes, std::uint64_t tokenizer_bytes) {
  parallel::run_agreed(comm, [&] {
    if (parallel::comm_rank(comm) != 0) return;
    const std::uint64_t need = (t.total_tokens + v.total_tokens) * token_bytes +
                               (t.total_documents + v.total_documents + 2) * 8 + tokenizer_bytes +
                               (64u << 10); // HDF5's metadata and chunk indexes
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = ".";
    const std::filesystem::space_info space = std::filesystem::space(dir, ec);
    if (!ec && space.available < need) {
      throw Error(fmt::format("cannot write '{}': it needs {:.1f} MiB and its file system has "
                              "{:.1f} MiB free; free space there or write elsewhere (-o)",
                              path, double(need) / (1 << 20), double(space.available) / (1 << 20)));
    }
  });
}

// Test-only: GRIDLM_FAULT_DATASET_WRITE=RANK makes that rank's first write step fail, as a full
// disk or an I/O error on that rank alone would (tests/cli/prepare_faults.sh).
void fault_if_asked(MPI_Comm comm) {
  static bool done = false;
  const char* rank = std::getenv("GRIDLM_FAULT_DATASET_WRITE");
  if (done || rank == nullptr || std::atoi(rank) != parallel::comm_rank(comm)) return;
  done = true;
  throw Error("an error injected by GRIDLM_FAULT_DATASET_WRITE");
}

} // namespace

void TokenBuffer::append(const std::vector<int>& ids) {
  if (wide_) {
    wide_tokens_.insert(wide_tokens_.end(), ids.begin(), ids.end());
  } else {
    for (int id : ids)
      narrow_tokens_.push_back(std::uint16_t(id));
  }
}

DatasetTotals write_token_dataset(MPI_Comm comm, const std::string& path,
                                  const DatasetHeader& header, const SplitPart& train,
                                  const SplitPart& valid) {
  const Counts t = place(comm, train), v = place(comm, valid);
  parallel::run_agreed(comm, [&] {
    if (t.total_documents == 0 && v.total_documents == 0) {
      throw Error(fmt::format("no documents to write to '{}': the input holds no text", path));
    }
    if (t.total_documents == 0) {
      throw Error(fmt::format("all {} documents went to the validation split, none is left to "
                              "train on; lower --valid-fraction",
                              v.total_documents));
    }
  });
  const std::string partial = path + ".partial";
  const bool root = parallel::comm_rank(comm) == 0;
  DatasetTotals totals{t.total_tokens, t.total_documents, v.total_tokens, v.total_documents, 0};
  check_space(comm, path, t, v, part_bytes(train), header.tokenizer_model.size());
  // A write that fails on some ranks (a full disk, an I/O error) is noted there while they go
  // on taking part in the collective steps with the others, and all agree at the end: a rank
  // that threw out of the block instead would close the file, a collective, while the others
  // wait in the next write (a hang), and a failure left unchecked would be renamed over `path`.
  std::string failure;
  const Attempt attempt = [&](const std::function<void()>& body) {
    try {
      body();
      fault_if_asked(comm);
    } catch (const Error& e) {
      if (failure.empty()) failure = e.what();
    }
  };
  // This rank's failure, as the agreement reports it ("" for none).
  const auto failed = [&] {
    return failure.empty() ? std::string()
                           : fmt::format("cannot write '{}': {}; '{}' is left as it was", partial,
                                         failure, path);
  };
  {
    parallel::fault::hang_in_save_if_asked(1); // test-only: the dataset is its first file
    ParallelFile f = ParallelFile::create(comm, partial);
    write_split(f, comm, "/", train, t, attempt);
    write_split(f, comm, "/valid/", valid, v, attempt);
    write_header(f, header, t, v, root, attempt);
    try {
      parallel::agree_on_errors(comm, failed());
    } catch (const CollectiveError& e) {
      // Not closed: its close writes HDF5's metadata to the file system that just failed, from
      // several ranks, between collectives a rank failing again would leave the others waiting
      // in. Rank 0 removes the file and ends the job; the others wait for that end.
      std::error_code ec;
      if (root) {
        std::filesystem::remove(partial, ec);
        abort_job(e.what());
      }
      GRIDLM_MPI_CHECK(MPI_Barrier(comm));
      abort_job(e.what());
    }
    attempt([&] { f.flush(); }); // what the close would write, checked
  }
  try {
    parallel::agree_on_errors(comm, failed());
  } catch (const CollectiveError&) {
    std::error_code ec;
    if (root) std::filesystem::remove(partial, ec);
    throw;
  }
  parallel::run_agreed(comm, [&] {
    if (!root) return;
    std::error_code ec;
    totals.file_bytes = std::filesystem::file_size(partial, ec);
    std::filesystem::rename(partial, path, ec);
    if (ec) {
      std::remove(partial.c_str());
      throw Error(fmt::format("cannot move '{}' to '{}': {}", partial, path, ec.message()));
    }
    // The file was synced before; its new name now is too.
    sync_directory(std::filesystem::path(path).parent_path().string());
  });
  return totals;
}

} // namespace gridlm::io
