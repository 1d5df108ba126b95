// Tokenized datasets written collectively and read back: the documented layout (types, sizes,
// attributes, offsets), the same file from any number of writing ranks, uint32 tokens for large
// vocabularies, the .partial protocol, samples as windows in the permuted order, the validation
// split, and decoding through the stored tokenizer. Runs at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "io/h5_check.hpp"
#include "io/token_dataset.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

// The HDF5 type of dataset `name`, on this process alone.
bool dataset_has_type(const std::string& path, const char* name, hid_t expected) {
  io::H5Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  io::H5Handle d(H5Dopen2(f.get(), name, H5P_DEFAULT));
  io::H5Handle t(H5Dget_type(d.get()));
  return H5Tequal(t.get(), expected) > 0;
}

io::TokenDatasetOptions options(int length, io::Split split = io::Split::train) {
  io::TokenDatasetOptions o;
  o.sample_length = length;
  o.seed = 99;
  o.split = split;
  return o;
}

} // namespace

TEST(TokenDataset, WrittenInTheDocumentedLayout) {
  const std::string path = test::shared_path("layout");
  const test::WrittenCorpus w = test::write_synthetic_dataset(path, 60, 5);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  const io::TokenDataset ds(MPI_COMM_WORLD, path, options(17));
  const io::DatasetInfo& info = ds.info();
  EXPECT_EQ(info.format_version, 1);
  EXPECT_EQ(info.vocab_size, 300);
  EXPECT_EQ(info.eos_id, 2);
  EXPECT_EQ(info.pad_id, -1);
  EXPECT_EQ(info.documents, 48u);
  EXPECT_EQ(info.valid_documents, 12u);
  EXPECT_EQ(info.tokens, w.tokens.size());
  EXPECT_EQ(info.valid_tokens, w.valid_tokens.size());
  EXPECT_EQ(info.token_bytes, 2);
  EXPECT_EQ(info.created_by, "gridlm tests");
  EXPECT_TRUE(dataset_has_type(path, "/tokens", H5T_STD_U16LE));
  EXPECT_TRUE(dataset_has_type(path, "/doc_offsets", H5T_STD_U64LE));
  EXPECT_TRUE(dataset_has_type(path, "/tokenizer/model", H5T_STD_U8LE));
  // The tokens and offsets are the corpus's, in order, whatever the number of writing ranks.
  std::vector<std::int32_t> tokens(w.tokens.size());
  ds.read_tokens(0, tokens.data(), tokens.size());
  EXPECT_EQ(tokens, w.tokens);
  EXPECT_EQ(ds.read_document_offsets(0, w.offsets.size()), w.offsets);
  const io::TokenDataset valid(MPI_COMM_WORLD, path, options(17, io::Split::valid));
  std::vector<std::int32_t> valid_tokens(w.valid_tokens.size());
  valid.read_tokens(0, valid_tokens.data(), valid_tokens.size());
  EXPECT_EQ(valid_tokens, w.valid_tokens);
  EXPECT_EQ(valid.read_document_offsets(0, w.valid_offsets.size()), w.valid_offsets);
  test::remove_on_rank0(path);
}

TEST(TokenDataset, StoredTokenizerDecodesTheDocuments) {
  const std::string path = test::shared_path("decode");
  const test::WrittenCorpus w = test::write_synthetic_dataset(path, 20, 4);
  const io::TokenDataset ds(MPI_COMM_WORLD, path, options(9));
  const io::Tokenizer t = ds.tokenizer();
  EXPECT_EQ(t.model_bytes(), test::small_tokenizer().model_bytes());
  for (std::size_t d = 0; d + 1 < w.offsets.size(); ++d) {
    const std::uint64_t b = w.offsets[d], e = w.offsets[d + 1] - 1; // without eos
    std::vector<std::int32_t> ids(e - b);
    ds.read_tokens(b, ids.data(), ids.size());
    EXPECT_EQ(t.decode(std::vector<int>(ids.begin(), ids.end())), w.texts[d]);
  }
  EXPECT_EQ(io::load_dataset_tokenizer(path).model_bytes(), t.model_bytes());
  test::remove_on_rank0(path);
}

TEST(TokenDataset, SamplesAreOverlappingWindowsInPermutedOrder) {
  const std::string path = test::shared_path("samples");
  const test::WrittenCorpus w = test::write_synthetic_dataset(path, 40, 0);
  const int length = 33;
  const io::TokenDataset ds(MPI_COMM_WORLD, path, options(length));
  const std::uint64_t n = ds.num_samples();
  EXPECT_EQ(n, (w.tokens.size() - 1) / (length - 1));
  // Two epochs: each visits every window once, in different orders; every window holds the
  // tokens at its place.
  std::vector<std::uint64_t> first, second;
  std::vector<std::int32_t> s(length);
  for (std::uint64_t c = 0; c < 2 * n; ++c) {
    ds.sample(s.data(), c, length);
    const std::uint64_t at = ds.sample_offset(c);
    ASSERT_EQ(at % (length - 1), 0u);
    ASSERT_TRUE(std::equal(s.begin(), s.end(), w.tokens.begin() + std::ptrdiff_t(at)));
    (c < n ? first : second).push_back(at / (length - 1));
  }
  EXPECT_NE(first, second);
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(first[i], i);
    ASSERT_EQ(second[i], i);
  }
  // The order is a function of the cursor alone: another seed, another order.
  io::TokenDatasetOptions other = options(length);
  other.seed = 100;
  const io::TokenDataset ds2(MPI_COMM_WORLD, path, other);
  int same = 0;
  for (std::uint64_t c = 0; c < n; ++c)
    same += ds2.sample_offset(c) == ds.sample_offset(c);
  EXPECT_LT(same, int(n) / 4);
  EXPECT_THROW(ds.sample(s.data(), 0, length - 1), Error);
  test::remove_on_rank0(path);
}

TEST(TokenDataset, LargeVocabulariesAreStoredAsUint32) {
  const std::string path = test::shared_path("wide");
  io::DatasetHeader h = test::header_for(test::small_tokenizer());
  h.vocab_size = 70000;
  io::SplitPart train(h.vocab_size), valid(h.vocab_size);
  const int r = test::world_rank();
  train.tokens.append({r, 69999, 65536 + r});
  train.doc_tokens.push_back(3);
  io::write_token_dataset(MPI_COMM_WORLD, path, h, train, valid);
  EXPECT_TRUE(dataset_has_type(path, "/tokens", H5T_STD_U32LE));
  io::H5Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  const io::DatasetInfo info = io::read_dataset_info(f.get(), path);
  EXPECT_EQ(info.token_bytes, 4);
  EXPECT_EQ(info.tokens, 3u * std::uint64_t(test::world_size()));
  io::H5Handle d(H5Dopen2(f.get(), "/tokens", H5P_DEFAULT));
  std::vector<std::uint32_t> all(info.tokens);
  H5Dread(d.get(), H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data());
  for (int q = 0; q < test::world_size(); ++q) {
    EXPECT_EQ(all[3 * q], std::uint32_t(q));
    EXPECT_EQ(all[3 * q + 1], 69999u);
    EXPECT_EQ(all[3 * q + 2], 65536u + std::uint32_t(q));
  }
  test::remove_on_rank0(path);
}

TEST(TokenDataset, AFailedWriteLeavesTheOldFileInPlace) {
  const std::string path = test::shared_path("keep");
  const test::WrittenCorpus w = test::write_synthetic_dataset(path, 10, 0);
  const auto before = std::filesystem::file_size(path);
  // Every document in the validation split: nothing to train on, refused before writing.
  const std::string msg =
      test::collective_error([&] { test::write_synthetic_dataset(path, 4, 1); });
  EXPECT_NE(msg.find("none is left to train on; lower --valid-fraction"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("rank"), 0u) << msg;
  EXPECT_EQ(std::filesystem::file_size(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  const io::TokenDataset ds(MPI_COMM_WORLD, path, options(5));
  EXPECT_EQ(ds.num_tokens(), w.tokens.size());
  test::remove_on_rank0(path);
}
