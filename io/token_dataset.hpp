// io::TokenDataset: reads a tokenized dataset (docs/formats/dataset.md) for training. Opening
// validates the file on every rank and agrees on the verdict, so a bad file is one clear error
// on all ranks, never a hang. Samples are windows of `sample_length` tokens starting every
// sample_length - 1 tokens (a window's last token is the next one's first), visited in the
// order of io::SampleOrder, and read by hyperslab from the file when asked for.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>

#include "io/h5_handle.hpp"
#include "io/parallel_h5.hpp"
#include "io/sample_order.hpp"
#include "io/token_source.hpp"
#include "io/tokenizer.hpp"

namespace gridlm::io {

enum class Split { train, valid };

// What a dataset file says about itself, once validated.
struct DatasetInfo {
  std::string path;
  std::int64_t format_version = 0;
  std::int64_t vocab_size = 0;
  std::int64_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  std::uint64_t tokens = 0, documents = 0;             // training split
  std::uint64_t valid_tokens = 0, valid_documents = 0; // validation split
  int token_bytes = 2;                                 // 2 (uint16) or 4 (uint32)
  std::string tokenizer, created_by;
};

// Checks the structure of an open dataset file on this process alone: the format attributes,
// every dataset's presence, type and size, and that counts agree. Reads no tokens. Throws
// gridlm::Error naming the file, the problem and what to do.
DatasetInfo read_dataset_info(hid_t file, const std::string& path);
// The stored tokenizer of a dataset file, opened on this process alone (for a tokenizer reused
// by prepare-data, or for decoding).
Tokenizer load_dataset_tokenizer(const std::string& path);

struct TokenDatasetOptions {
  int sample_length = 129;     // tokens per sample: model.seq_len + 1
  std::uint64_t seed = 7;      // of the sample order
  Split split = Split::train;  // which split to read
  bool check_token_ids = true; // read every token once at open to check it is < vocab_size
};

class TokenDataset final : public TokenSource {
public:
  // Collective over `comm`: every rank validates; an error on any rank is a CollectiveError on
  // all of them.
  TokenDataset(MPI_Comm comm, const std::string& path, const TokenDatasetOptions& options);

  int vocab_size() const override { return int(info_.vocab_size); }
  // Sample at global cursor `index` (any value: epochs follow one another). Reads from the
  // file on this rank alone, through a POSIX handle: no MPI call, so a prefetch thread may read
  // (HDF5 itself is not thread-safe: one thread at a time).
  void sample(std::int32_t* out, std::uint64_t index, int length) const override;
  std::string describe() const override;
  std::optional<Extent> extent() const override {
    return Extent{tokens_, documents_, num_samples()};
  }

  const DatasetInfo& info() const { return info_; }
  std::uint64_t num_tokens() const { return tokens_; }
  std::uint64_t num_documents() const { return documents_; }
  // Samples per epoch.
  std::uint64_t num_samples() const { return order_->size(); }
  // Where the sample at global cursor `index` starts in the split's tokens.
  std::uint64_t sample_offset(std::uint64_t index) const {
    return (*order_)(index)*std::uint64_t(options_.sample_length - 1);
  }
  // Tokens [offset, offset + count) of the split, on this rank alone.
  void read_tokens(std::uint64_t offset, std::int32_t* out, std::uint64_t count) const;
  // Document offsets [first, first + count) of the split (count <= num_documents() + 1 - first).
  std::vector<std::uint64_t> read_document_offsets(std::uint64_t first, std::uint64_t count) const;
  Tokenizer tokenizer() const;

private:
  void check_token_ids(MPI_Comm comm) const;
  // Throws when the file is no longer the one opened (replaced, cut short or written to since),
  // or a sample holds an id outside the vocabulary: HDF5 reads past a file's end as zeros, and a
  // damaged id would index past the embedding.
  // The file is looked at once a second at most, or now when `now_too`.
  void check_unchanged(const std::int32_t* sample, int length, bool now_too) const;

  struct Identity {
    unsigned long long device = 0, inode = 0, size = 0;
    long long modified_ns = 0;
    bool operator==(const Identity& o) const {
      return device == o.device && inode == o.inode && size == o.size &&
             modified_ns == o.modified_ns;
    }
  };
  static Identity identity_of(const std::string& path);

  TokenDatasetOptions options_;
  DatasetInfo info_;
  std::optional<ParallelFile> file_; // MPI-IO: collective validation
  H5Handle local_file_;              // sec2: this rank's sample reads, no MPI involved
  H5Handle tokens_dataset_;          // in local_file_
  std::string tokens_name_, offsets_name_;
  std::uint64_t tokens_ = 0, documents_ = 0;
  std::optional<SampleOrder> order_;
  Identity opened_; // the file as it was when opened
  // Steady-clock time of the next look at the file (one thread reads samples at a time).
  mutable long long next_stat_ns_ = 0;
};

} // namespace gridlm::io
