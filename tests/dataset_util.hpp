// Helpers for the dataset tests: a path and a directory all ranks share, a small tokenizer trained
// on the synthetic corpus, and a dataset of that corpus written collectively (each rank a share of
// the documents), with what was written kept for comparison.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/dataset_writer.hpp"
#include "io/synthetic_corpus.hpp"
#include "io/tokenizer.hpp"
#include "tests/test_util.hpp"

namespace gridlm::test {

// One path for all ranks, unique per test run.
inline std::string shared_path(const std::string& stem) {
  long id = world_rank() == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return "/tmp/gridlm_test_" + stem + "_" + std::to_string(id) + ".h5";
}

// A directory for all ranks, unique per test run, removed at the end.
struct SharedDir {
  explicit SharedDir(const std::string& stem) : path(shared_path(stem) + ".d") {}
  ~SharedDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    if (world_rank() == 0) std::filesystem::remove_all(path, ec);
  }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;
  std::string path;
};

// Trained once per process, the same on every rank (training is deterministic).
inline const io::Tokenizer& small_tokenizer() {
  static const io::Tokenizer t = [] {
    const io::SyntheticCorpus corpus(11);
    int i = 0;
    io::BpeTrainingOptions o;
    o.vocab_size = 300;
    o.byte_fallback = false;
    return io::train_bpe(o, [&](std::string& text) {
      if (i == 400) return false;
      text = corpus.document(std::uint64_t(i++));
      return true;
    });
  }();
  return t;
}

inline io::DatasetHeader header_for(const io::Tokenizer& t) {
  io::DatasetHeader h = io::header_for_tokenizer(t);
  h.tokenizer = "test tokenizer";
  h.created_by = "gridlm tests";
  return h;
}

// Documents [0, n) of the synthetic corpus, encoded and ended by eos; every `valid_every`-th
// goes to the validation split (none when 0). Each rank writes its share; all of it is
// returned (on every rank) as the expected contents.
struct WrittenCorpus {
  std::vector<std::int32_t> tokens, valid_tokens;
  std::vector<std::uint64_t> offsets{0}, valid_offsets{0};
  std::vector<std::string> texts, valid_texts;
};

inline WrittenCorpus write_synthetic_dataset(const std::string& path, int n, int valid_every) {
  const io::Tokenizer& t = small_tokenizer();
  const io::SyntheticCorpus corpus(5);
  WrittenCorpus all;
  io::SplitPart train(t.vocab_size()), valid(t.vocab_size());
  const int rank = world_rank(), size = world_size();
  for (int d = 0; d < n; ++d) {
    const std::string text = corpus.document(std::uint64_t(d));
    std::vector<int> ids;
    t.encode(text, ids);
    ids.push_back(t.eos_id());
    const bool is_valid = valid_every > 0 && d % valid_every == valid_every - 1;
    auto& tokens = is_valid ? all.valid_tokens : all.tokens;
    auto& offsets = is_valid ? all.valid_offsets : all.offsets;
    (is_valid ? all.valid_texts : all.texts).push_back(text);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    offsets.push_back(tokens.size());
    if (d >= n * rank / size && d < n * (rank + 1) / size) {
      io::SplitPart& part = is_valid ? valid : train;
      part.tokens.append(ids);
      part.doc_tokens.push_back(ids.size());
    }
  }
  io::write_token_dataset(MPI_COMM_WORLD, path, header_for(t), train, valid);
  return all;
}

inline void remove_on_rank0(const std::string& path) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

} // namespace gridlm::test
