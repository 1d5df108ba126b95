// Writing a tokenized dataset (docs/formats/dataset.md): every rank holds the tokens of the
// documents it tokenized, and all write them collectively into one HDF5 file at offsets that
// follow rank order, so the file is the same whatever the number of ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.hpp"

namespace gridlm::io {

// Format name and version, stored as the root attributes "format" and "format_version". The
// version changes when a reader of the old version would misread a new file.
inline constexpr const char* dataset_format = "gridlm-tokens";
inline constexpr int dataset_format_version = 1;
// Largest vocabulary stored as uint16; larger ones use uint32.
inline constexpr std::int64_t narrow_vocab_limit = 65536;

// Token ids of one split, as one rank holds them before the write: at the file's width, so a
// large corpus does not need twice the memory while it is narrowed.
class TokenBuffer {
public:
  explicit TokenBuffer(std::int64_t vocab_size) : wide_(vocab_size > narrow_vocab_limit) {}
  void append(const std::vector<int>& ids);
  std::uint64_t size() const { return wide_ ? wide_tokens_.size() : narrow_tokens_.size(); }
  bool wide() const { return wide_; }
  const std::vector<std::uint16_t>& narrow_tokens() const { return narrow_tokens_; }
  const std::vector<std::uint32_t>& wide_tokens() const { return wide_tokens_; }

private:
  bool wide_;
  std::vector<std::uint16_t> narrow_tokens_;
  std::vector<std::uint32_t> wide_tokens_;
};

// This rank's documents of one split, in corpus order.
struct SplitPart {
  explicit SplitPart(std::int64_t vocab_size) : tokens(vocab_size) {}
  TokenBuffer tokens;                    // the documents back to back
  std::vector<std::uint64_t> doc_tokens; // tokens of each document
};

// What every rank passes alike: the file's attributes and the tokenizer.
struct DatasetHeader {
  std::int64_t vocab_size = 0;
  int bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1; // -1: the tokenizer has none
  std::string tokenizer_model;                            // SentencePiece model bytes
  std::string tokenizer;                                  // how it was made, in words
  std::string created_by;                                 // the command line
  double valid_fraction = 0.0;
  std::uint64_t seed = 0;
};

// A header with the tokenizer's vocabulary, special ids and model bytes filled in; the caller
// adds how it was made.
DatasetHeader header_for_tokenizer(const Tokenizer& tokenizer);

struct DatasetTotals {
  std::uint64_t tokens = 0, documents = 0, valid_tokens = 0, valid_documents = 0;
  std::uint64_t file_bytes = 0;
};

// Collective over `comm`. Writes `path` + ".partial" and renames it to `path` when complete, so
// a failure never leaves a half-written file in place of a good one. Errors (no training
// documents, an unwritable directory) are agreed: every rank throws the same CollectiveError.
DatasetTotals write_token_dataset(MPI_Comm comm, const std::string& path,
                                  const DatasetHeader& header, const SplitPart& train,
                                  const SplitPart& valid);

} // namespace gridlm::io
