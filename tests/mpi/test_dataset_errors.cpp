// Bad dataset files: each problem is one error naming the file, what is wrong and what to do,
// agreed by every rank (the report starts "ranks 0-N:" with every rank listed), and the ranks
// carry on afterwards (no one is left in a collective). A good file is written, then rank 0
// damages a copy with plain HDF5 calls. Runs at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

#include "io/h5_check.hpp"
#include "io/token_dataset.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

class DatasetErrors : public testing::Test {
protected:
  void SetUp() override {
    path_ = test::shared_path("bad");
    written_ = test::write_synthetic_dataset(path_, 30, 5);
  }
  void TearDown() override { test::remove_on_rank0(path_); }

  // Rank 0 changes the file with one-process HDF5; the others wait.
  void edit(const std::function<void(hid_t)>& change) {
    if (test::world_rank() == 0) {
      io::H5Handle f(H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      ASSERT_TRUE(f);
      change(f.get());
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  // The agreed error of opening the file for samples of `length` tokens.
  std::string open_error(int length = 9, io::Split split = io::Split::train) {
    io::TokenDatasetOptions o;
    o.sample_length = length;
    o.split = split;
    const std::string msg =
        test::collective_error([&] { io::TokenDataset(MPI_COMM_WORLD, path_, o); });
    const int n = test::world_size();
    const std::string ranks = n == 1 ? "rank 0: " : fmt::format("ranks 0-{}: ", n - 1);
    EXPECT_EQ(msg.rfind(ranks, 0), 0u) << "not agreed by every rank: " << msg;
    EXPECT_NE(msg.find("'" + path_ + "'"), std::string::npos) << "file not named: " << msg;
    // Still in step: a collective after the failure completes.
    MPI_Barrier(MPI_COMM_WORLD);
    return msg;
  }

  std::string path_;
  test::WrittenCorpus written_;
};

void set_int_attribute(hid_t f, const char* name, std::int64_t v) {
  H5Adelete(f, name);
  io::H5Handle space(H5Screate(H5S_SCALAR));
  io::H5Handle a(H5Acreate2(f, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  H5Awrite(a.get(), H5T_NATIVE_INT64, &v);
}

void set_string_attribute(hid_t f, const char* name, const std::string& v) {
  H5Adelete(f, name);
  io::H5Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), v.size());
  io::H5Handle space(H5Screate(H5S_SCALAR));
  io::H5Handle a(H5Acreate2(f, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  H5Awrite(a.get(), type.get(), v.data());
}

// Replaces 1-D dataset `name` by one of `type` holding `values`.
void replace_dataset(hid_t f, const char* name, hid_t type, const std::vector<std::int32_t>& v) {
  H5Ldelete(f, name, H5P_DEFAULT);
  const hsize_t n = v.size();
  io::H5Handle space(H5Screate_simple(1, &n, nullptr));
  io::H5Handle d(H5Dcreate2(f, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Dwrite(d.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
}

bool has(const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos;
}

} // namespace

TEST_F(DatasetErrors, GoodFileOpens) {
  io::TokenDatasetOptions o;
  o.sample_length = 9;
  EXPECT_EQ(test::collective_error([&] { io::TokenDataset(MPI_COMM_WORLD, path_, o); }), "");
}

TEST_F(DatasetErrors, MissingFile) {
  const std::string good = path_;
  path_ += ".missing";
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "cannot read dataset") && has(msg, "it does not exist") &&
              has(msg, "gridlm prepare-data"))
      << msg;
  path_ = good;
}

TEST_F(DatasetErrors, TruncatedFile) {
  if (test::world_rank() == 0) {
    std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "damaged or cut short") && has(msg, "truncated")) << msg;
}

TEST_F(DatasetErrors, IndexFileOfShardsIsNotSupported) {
  if (test::world_rank() == 0) std::ofstream(path_) << "shard-000.h5\nshard-001.h5\n";
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "is not an HDF5 file") && has(msg, "index file is not supported yet"))
      << msg;
}

TEST_F(DatasetErrors, WrongTokenType) {
  edit([&](hid_t f) { replace_dataset(f, "/tokens", H5T_STD_I32LE, written_.tokens); });
  std::string msg = open_error();
  EXPECT_TRUE(has(msg, "has a dataset '/tokens' of type int32, where the format has uint16 or "
                       "uint32"))
      << msg;
  edit([&](hid_t f) { replace_dataset(f, "/tokens", H5T_IEEE_F32LE, written_.tokens); });
  msg = open_error();
  EXPECT_TRUE(has(msg, "'/tokens' of type float32")) << msg;
}

TEST_F(DatasetErrors, TokenIdsBeyondTheVocabulary) {
  std::vector<std::int32_t> tokens = written_.tokens;
  tokens[7] = 300;
  tokens[tokens.size() - 3] = 4000;
  edit([&](hid_t f) { replace_dataset(f, "/tokens", H5T_STD_U16LE, tokens); });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "holds 2 token ids >= its vocab_size 300 in '/tokens' (the first at "
                       "token 7, the largest 4000)"))
      << msg;
}

TEST_F(DatasetErrors, FewerTokensThanOneSample) {
  const std::string msg = open_error(int(written_.tokens.size()) + 1);
  EXPECT_TRUE(has(msg, fmt::format("holds {} tokens in its training split, fewer than one "
                                   "sample of {} (model.seq_len + 1)",
                                   written_.tokens.size(), written_.tokens.size() + 1)))
      << msg;
}

TEST_F(DatasetErrors, AttributeOfTheWrongType) {
  edit([](hid_t f) { set_string_attribute(f, "vocab_size", "300"); });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "has an attribute 'vocab_size' of type string, where the format has an "
                       "integer"))
      << msg;
}

TEST_F(DatasetErrors, MissingAttribute) {
  edit([](hid_t f) { H5Adelete(f, "eos_id"); });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "lacks the attribute 'eos_id' that format version 1 requires")) << msg;
}

TEST_F(DatasetErrors, VersionMismatch) {
  edit([](hid_t f) { set_int_attribute(f, "format_version", 2); });
  std::string msg = open_error();
  EXPECT_TRUE(has(msg, "has format version 2, newer than this gridlm reads (1); use a newer "
                       "gridlm"))
      << msg;
  edit([](hid_t f) { set_int_attribute(f, "format_version", 0); });
  msg = open_error();
  EXPECT_TRUE(has(msg, "has format version 0, which gridlm does not know")) << msg;
}

TEST_F(DatasetErrors, NotADatasetFile) {
  edit([](hid_t f) { set_string_attribute(f, "format", "gridlm weights v1"); });
  std::string msg = open_error();
  EXPECT_TRUE(has(msg, "is not a gridlm token dataset: its format is 'gridlm weights v1'")) << msg;
  edit([](hid_t f) { H5Adelete(f, "format"); });
  msg = open_error();
  EXPECT_TRUE(has(msg, "it has no 'format' attribute")) << msg;
}

TEST_F(DatasetErrors, CountsThatDisagreeWithTheData) {
  edit(
      [&](hid_t f) { set_int_attribute(f, "n_tokens", std::int64_t(written_.tokens.size()) + 1); });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, fmt::format("has {} tokens in '/tokens' but its attributes say {}",
                                   written_.tokens.size(), written_.tokens.size() + 1)))
      << msg;
}

TEST_F(DatasetErrors, DocumentOffsetsOutOfOrder) {
  edit([&](hid_t f) {
    io::H5Handle d(H5Dopen2(f, "/doc_offsets", H5P_DEFAULT));
    std::vector<std::uint64_t> o(written_.offsets);
    std::swap(o[3], o[4]);
    H5Dwrite(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, o.data());
  });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "has a bad entry 4 in '/doc_offsets'")) << msg;
}

// The offsets are checked in blocks of 2^17 entries: a fall from the last entry of one block to
// the first of the next (at one rank; more ranks cut the list elsewhere) is found too. The file
// is given 140000 documents, all empty but one, with a fall at entry 131072.
TEST_F(DatasetErrors, DocumentOffsetsThatFallAcrossABlock) {
  const std::uint64_t documents = 140000, fall = std::uint64_t(1) << 17;
  const std::uint64_t tokens = written_.tokens.size();
  edit([&](hid_t f) {
    std::vector<std::uint64_t> o(documents + 1, tokens);
    for (std::uint64_t d = 0; d < fall; ++d)
      o[d] = d + 1 == fall ? 5 : 0;
    o[fall] = 4;
    H5Ldelete(f, "/doc_offsets", H5P_DEFAULT);
    const hsize_t n = o.size();
    io::H5Handle space(H5Screate_simple(1, &n, nullptr));
    io::H5Handle d(H5Dcreate2(f, "/doc_offsets", H5T_STD_U64LE, space.get(), H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT));
    H5Dwrite(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, o.data());
    set_int_attribute(f, "n_documents", std::int64_t(documents));
  });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, fmt::format("has a bad entry {} in '/doc_offsets'", fall))) << msg;
}

// A validation split too short for one sample: the fixes are the split's, not model.seq_len.
TEST_F(DatasetErrors, ValidationSplitShorterThanOneSample) {
  const std::string msg = open_error(int(written_.valid_tokens.size()) + 1, io::Split::valid);
  EXPECT_TRUE(has(msg, "in its validation split, fewer than one sample")) << msg;
  EXPECT_TRUE(has(msg, "a larger --valid-fraction")) << msg;
  EXPECT_TRUE(has(msg, "train.eval_every = 0")) << msg;
}

TEST_F(DatasetErrors, BrokenTokenizer) {
  edit([](hid_t f) {
    io::H5Handle d(H5Dopen2(f, "/tokenizer/model", H5P_DEFAULT));
    io::H5Handle space(H5Dget_space(d.get()));
    std::vector<std::uint8_t> junk(std::size_t(H5Sget_simple_extent_npoints(space.get())), 0xAB);
    H5Dwrite(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, junk.data());
  });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "the tokenizer stored in '" + path_ + "' is not a SentencePiece model"))
      << msg;
}

TEST_F(DatasetErrors, MissingDataset) {
  edit([](hid_t f) { H5Ldelete(f, "/valid", H5P_DEFAULT); });
  const std::string msg = open_error();
  EXPECT_TRUE(has(msg, "has no dataset '/valid/tokens'")) << msg;
}

TEST_F(DatasetErrors, NoValidationSplit) {
  const std::string good = path_;
  path_ = test::shared_path("no_valid");
  test::write_synthetic_dataset(path_, 10, 0);
  const std::string msg = open_error(9, io::Split::valid);
  EXPECT_TRUE(has(msg, "has no validation split (0 documents)")) << msg;
  test::remove_on_rank0(path_);
  path_ = good;
}

// Found by the fuzz target of read_dataset_info (tests/fuzz): a link where a dataset belongs
// that leads to no object was reported as a failed HDF5 call, naming neither file nor dataset.
TEST_F(DatasetErrors, LinkThatLeadsNowhere) {
  edit([](hid_t f) {
    H5Ldelete(f, "/valid/tokens", H5P_DEFAULT);
    H5Lcreate_soft("/valid/elsewhere", f, "/valid/tokens", H5P_DEFAULT, H5P_DEFAULT);
  });
  std::string msg = open_error();
  EXPECT_TRUE(has(msg, "has '/valid/tokens', a link that leads to no object")) << msg;
  edit([](hid_t f) {
    H5Ldelete(f, "/tokens", H5P_DEFAULT);
    H5Lcreate_external("/nonexistent/shard-000.h5", "/tokens", f, "/tokens", H5P_DEFAULT,
                       H5P_DEFAULT);
  });
  msg = open_error();
  EXPECT_TRUE(has(msg, "has '/tokens', a link that leads to no object")) << msg;
}
