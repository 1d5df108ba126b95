// The collective write of a tokenized dataset.
#include "io/dataset_writer.hpp"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "gridlm/version.hpp"
#include "io/parallel_h5.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
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

void write_split(ParallelFile& f, MPI_Comm comm, const std::string& group, const SplitPart& part,
                 const Counts& c) {
  const std::string tokens = group + "tokens", offsets = group + "doc_offsets";
  // Small splits get one chunk of their own size, not a mostly empty 2 MiB one.
  const auto chunk = [](std::uint64_t n, std::uint64_t most) {
    return std::min(most, std::max<std::uint64_t>(n, 1));
  };
  if (part.tokens.wide()) {
    f.write(tokens, c.total_tokens, c.token_offset,
            Span<const std::uint32_t>(part.tokens.wide_tokens()),
            chunk(c.total_tokens, token_chunk));
  } else {
    f.write(tokens, c.total_tokens, c.token_offset,
            Span<const std::uint16_t>(part.tokens.narrow_tokens()),
            chunk(c.total_tokens, token_chunk));
  }
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
  f.write(offsets, c.total_documents + 1, c.doc_offset, Span<const std::uint64_t>(starts),
          chunk(c.total_documents + 1, token_chunk / 4));
  f.write_attribute(tokens, "description",
                    std::string("token ids of the documents back to back, each document ended by "
                                "eos_id (when the tokenizer has one); read with doc_offsets"));
  f.write_attribute(offsets, "description",
                    std::string("document d is tokens[doc_offsets[d]:doc_offsets[d+1]]"));
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
  {
    ParallelFile f = ParallelFile::create(comm, partial);
    write_split(f, comm, "/", train, t);
    write_split(f, comm, "/valid/", valid, v);
    const std::string& model = header.tokenizer_model;
    f.write("/tokenizer/model", model.size(), 0,
            root ? Span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(model.data()),
                                            model.size())
                 : Span<const std::uint8_t>(),
            0);
    f.write_attribute("/tokenizer/model", "description",
                      std::string("SentencePiece model (serialized ModelProto): "
                                  "sentencepiece.SentencePieceProcessor(model_proto=bytes(...))"));
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
    f.write_attribute("/", "format", std::string(dataset_format));
    for (const auto& [name, value] : ints)
      f.write_attribute("/", name, value);
    f.write_attribute("/", "valid_fraction", header.valid_fraction);
    f.write_attribute("/", "tokenizer", header.tokenizer);
    f.write_attribute("/", "created_by", header.created_by);
    f.write_attribute("/", "gridlm_version", std::string(build::version));
    f.write_attribute("/", "description",
                      std::string("gridlm tokenized dataset (docs/formats/dataset.md): /tokens "
                                  "and /doc_offsets hold the training split, /valid/* the "
                                  "validation split, /tokenizer/model the tokenizer"));
    f.close();
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
  });
  return totals;
}

} // namespace gridlm::io
