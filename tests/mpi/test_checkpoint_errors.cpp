// Bad checkpoints, named on every rank with the problem and the fix, before any step runs:
// a missing file; `latest` naming a missing file, or empty (a save cut short on a file system
// without ordered writes: not a fresh start); a weights file given to --resume (no
// optimizer state: use --init-from); another model shape; another vocabulary alone; a flipped byte
// in a tensor (its checksum); a truncated file; an unknown format version; a file that is not a
// checkpoint; another data source, or a dataset remade at the same path with other counts
// (data.on_change, kept through a rollback); and a checkpoint.dir that cannot be a directory. Runs
// at 1, 2 and 4 ranks (data parallel). And which checkpoints a save prunes.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <filesystem>
#include <fstream>

#include "engine/checkpointer.hpp"
#include "engine/trainer.hpp"
#include "parallel/fault_injection.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

class CheckpointErrors : public testing::Test {
protected:
  void SetUp() override {
    dir_ = test::shared_path("ckpt_errors") + ".d";
    parallel::GridOptions o;
    o.layout = {test::world_size(), 1, 1};
    grid_ = std::make_unique<parallel::Grid>(parallel::Grid::create(MPI_COMM_WORLD, o));
    engine::RunConfig c = config();
    c.checkpoint.dir = "checkpoints";
    engine::train(c, *grid_);
    checkpoint_ = dir_ + "/checkpoints/step-000002.h5";
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    if (test::world_rank() == 0) std::filesystem::remove_all(dir_, ec);
  }

  engine::RunConfig config() const {
    engine::RunConfig c;
    c.model.vocab_size = 32;
    c.model.seq_len = 8;
    c.model.n_layer = 2;
    c.model.n_head = 2;
    c.model.d_model = 16;
    c.train.micro_batch = 4 / test::world_size();
    c.train.steps = 2;
    c.train.log_every = 100;
    c.output.dir = dir_;
    c.output.metrics = "";
    c.output.weights = "model.h5";
    return c;
  }
  // The error every rank gets resuming from `path` (or with `c` as it is).
  std::string resume_error(const std::string& path, engine::RunConfig c) const {
    c.output.dir = dir_ + "/resumed";
    c.train.steps = 4;
    c.checkpoint.resume = path;
    return test::collective_error([&] { engine::train(c, *grid_); });
  }
  std::string resume_error(const std::string& path) const { return resume_error(path, config()); }
  // Rank 0 makes a damaged copy of the checkpoint; every rank gets its name.
  std::string damaged(const std::string& name, const std::function<void(const std::string&)>& f) {
    const std::string copy = dir_ + "/" + name + ".h5";
    if (test::world_rank() == 0) {
      std::filesystem::copy_file(checkpoint_, copy);
      f(copy);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return copy;
  }

  std::string dir_, checkpoint_;
  std::unique_ptr<parallel::Grid> grid_;
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_F(CheckpointErrors, AMissingFileIsNamed) {
  const std::string msg = resume_error(dir_ + "/no-such.h5");
  EXPECT_TRUE(has(msg, "no-such.h5': no such checkpoint")) << msg;
}

TEST_F(CheckpointErrors, LatestNamingAMissingFileIsNamed) {
  if (test::world_rank() == 0) {
    std::ofstream(dir_ + "/checkpoints/latest") << "step-000099.h5\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  engine::RunConfig c = config();
  c.checkpoint.dir = "checkpoints";
  c.output.dir = dir_;
  c.train.steps = 4;
  c.checkpoint.resume = "auto";
  const std::string msg = test::collective_error([&] { engine::train(c, *grid_); });
  EXPECT_TRUE(has(msg, "names 'step-000099.h5', which does not exist")) << msg;
}

TEST_F(CheckpointErrors, AnEmptyLatestIsNamedNotAFreshStart) {
  if (test::world_rank() == 0) std::ofstream(dir_ + "/checkpoints/latest", std::ios::trunc);
  MPI_Barrier(MPI_COMM_WORLD);
  engine::RunConfig c = config();
  c.checkpoint.dir = "checkpoints";
  c.train.steps = 4;
  c.checkpoint.resume = "auto";
  const std::string msg = test::collective_error([&] { engine::train(c, *grid_); });
  EXPECT_TRUE(has(msg, "checkpoints/latest' cannot be read or names no checkpoint")) << msg;
  EXPECT_TRUE(has(msg, "point --resume at a checkpoint file")) << msg;
}

// By step number, the newest `keep` up to the one just published; later ones (of a run resumed
// from before them) and other names are left alone.
TEST(CheckpointPrune, ByStepNumberNeverPastThePublishedOne) {
  const std::vector<std::string> names{
      "step-999998.h5",         "latest",      "step-999999.h5", "step-1000000.h5",
      "step-000004.h5.partial", "step-12x.h5", "step-1000001.h5"};
  EXPECT_EQ(engine::checkpoints_to_prune(names, 1000000, 2),
            (std::vector<std::string>{"step-999998.h5"}));
  EXPECT_EQ(engine::checkpoints_to_prune(names, 1000001, 1),
            (std::vector<std::string>{"step-999998.h5", "step-999999.h5", "step-1000000.h5"}));
  // Resumed from step 2 of a run that went on to 5: its save of step 3 keeps 3, leaves 4 and 5.
  const std::vector<std::string> resumed{"step-000002.h5", "step-000003.h5", "step-000004.h5",
                                         "step-000005.h5"};
  EXPECT_EQ(engine::checkpoints_to_prune(resumed, 3, 1),
            (std::vector<std::string>{"step-000002.h5"}));
  EXPECT_TRUE(engine::checkpoints_to_prune(resumed, 3, 2).empty());
}

TEST_F(CheckpointErrors, AWeightsFileCannotResumeButCanStartANewRun) {
  const std::string msg = resume_error(dir_ + "/model.h5");
  EXPECT_TRUE(has(msg, "without optimizer state")) << msg;
  EXPECT_TRUE(has(msg, "--init-from")) << msg;
  engine::RunConfig c = config();
  c.output.dir = dir_ + "/fine-tune";
  c.checkpoint.init_from = dir_ + "/model.h5";
  EXPECT_EQ(test::collective_error([&] { engine::train(c, *grid_); }), "");
}

TEST_F(CheckpointErrors, AnotherModelShapeIsRefused) {
  engine::RunConfig c = config();
  c.model.d_model = 32;
  const std::string msg = resume_error(checkpoint_, c);
  EXPECT_TRUE(has(msg, "holds a model with d_model = 16, but this run has model.d_model = 32"))
      << msg;
}

// Only the vocabulary differs: the tensors' other dimensions all match, so nothing but the
// header check stands between the file and a wrong-sized embedding read.
TEST_F(CheckpointErrors, AnotherVocabularyAloneIsRefused) {
  engine::RunConfig c = config();
  c.model.vocab_size = 48;
  const std::string msg = resume_error(checkpoint_, c);
  EXPECT_TRUE(
      has(msg, "holds a model with vocab_size = 32, but this run has model.vocab_size = 48"))
      << msg;
  c.checkpoint.init_from = checkpoint_;
  c.output.dir = dir_ + "/fine-tune";
  const std::string init = test::collective_error([&] { engine::train(c, *grid_); });
  EXPECT_TRUE(has(init, "holds a model with vocab_size = 32")) << init;
}

TEST_F(CheckpointErrors, AFlippedByteFailsItsChecksum) {
  const std::string copy = damaged("flipped", [](const std::string& path) {
    haddr_t offset = HADDR_UNDEF;
    {
      const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      const hid_t d = H5Dopen2(f, "h.1.mlp.c_fc.weight", H5P_DEFAULT);
      offset = H5Dget_offset(d);
      H5Dclose(d);
      H5Fclose(f);
    }
    ASSERT_NE(offset, HADDR_UNDEF);
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(std::streamoff(offset) + 101);
    char byte = 0;
    file.get(byte);
    file.seekp(std::streamoff(offset) + 101);
    file.put(char(byte ^ 0x10));
  });
  const std::string msg = resume_error(copy);
  EXPECT_TRUE(has(msg, "dataset 'h.1.mlp.c_fc.weight' does not match its checksum")) << msg;
}

TEST_F(CheckpointErrors, ATruncatedFileIsNamed) {
  const std::string copy = damaged("truncated", [](const std::string& path) {
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  });
  const std::string msg = resume_error(copy);
  EXPECT_TRUE(has(msg, "truncated.h5' is an HDF5 file that cannot be opened: damaged or cut short"))
      << msg;
}

TEST_F(CheckpointErrors, AnUnknownVersionIsNamed) {
  const std::string copy = damaged("version", [](const std::string& path) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    const std::int64_t two = 2;
    H5Awrite(a, H5T_NATIVE_INT64, &two);
    H5Aclose(a);
    H5Fclose(f);
  });
  const std::string msg = resume_error(copy);
  EXPECT_TRUE(has(msg, "has checkpoint format version 2; this gridlm reads version 1")) << msg;
}

TEST_F(CheckpointErrors, ADatasetFileIsNotACheckpoint) {
  const std::string data = dir_ + "/tokens.h5";
  test::write_synthetic_dataset(data, 40, 0); // collective
  const std::string msg = resume_error(data);
  EXPECT_TRUE(has(msg, "is not a gridlm checkpoint or weights file")) << msg;
}

TEST_F(CheckpointErrors, OtherDataIsANewRun) {
  engine::RunConfig c = config();
  c.data.seed = 8;
  const std::string msg = resume_error(checkpoint_, c);
  EXPECT_TRUE(has(msg, "with data.seed = 7, but this run has 'synthetic' with 8")) << msg;
}

// A dataset remade at the same path with more documents changes the order of its samples: the
// resumed run is stopped with both counts named, unless data.on_change = continue. A checkpoint
// from before the counts were recorded resumes as before.
TEST_F(CheckpointErrors, ADatasetRemadeAtTheSamePathIsNamed) {
  const std::string data = dir_ + "/tokens.h5";
  test::write_synthetic_dataset(data, 40, 0);
  engine::RunConfig c = config();
  c.model.vocab_size = test::small_tokenizer().vocab_size();
  c.data.source = data;
  c.checkpoint.dir = "on-data";
  engine::train(c, *grid_);
  const std::string checkpoint = dir_ + "/on-data/step-000002.h5";
  c.checkpoint.dir = "";
  // Two more steps from `from` into their own output directory.
  const auto resumed = [&](const std::string& from, const std::string& out, const char* change) {
    engine::RunConfig r = c;
    r.output.dir = dir_ + "/" + out;
    r.train.steps = 4;
    r.checkpoint.resume = from;
    r.data.on_change = change;
    engine::train(r, *grid_);
  };
  EXPECT_NO_THROW(resumed(checkpoint, "same", "stop")) << "the same data resumes";
  test::write_synthetic_dataset(data, 50, 0);
  const std::string msg = resume_error(checkpoint, c);
  EXPECT_TRUE(
      has(msg, "step-000002.h5' was trained on '" + data + "' when its training split held"))
      << msg;
  EXPECT_TRUE(has(msg, "tokens in 40 documents; it holds")) << msg;
  EXPECT_TRUE(has(msg, "tokens in 50 documents now")) << msg;
  EXPECT_TRUE(has(msg, "data.on_change = \"continue\"")) << msg;
  EXPECT_NO_THROW(resumed(checkpoint, "continued", "continue"));

  // A rollback to the checkpoint the run resumed from keeps the run's own data counts for the
  // files it writes after (it took the checkpoint's, and the next resume was refused as remade).
  engine::RunConfig rolled = c;
  rolled.output.dir = dir_ + "/rolled";
  rolled.train.steps = 5;
  rolled.checkpoint.resume = checkpoint;
  rolled.checkpoint.dir = "rb";
  rolled.data.on_change = "continue";
  rolled.train.on_nonfinite = "rollback";
  setenv("GRIDLM_FAULT", "nan_grad:0:3", 1); // a NaN gradient at step 3: back to step 2
  parallel::fault::configure_from_environment();
  EXPECT_NO_THROW(engine::train(rolled, *grid_));
  unsetenv("GRIDLM_FAULT");
  parallel::fault::configure_from_environment();
  engine::RunConfig after = rolled;
  after.output.dir = dir_ + "/after-rollback";
  after.train.steps = 6;
  after.checkpoint.resume = dir_ + "/rolled/rb/step-000005.h5";
  after.checkpoint.dir = "";
  after.data.on_change = "stop";
  EXPECT_NO_THROW(engine::train(after, *grid_)) << "the data has not changed since";

  const std::string older = damaged("older", [&](const std::string& path) {
    std::filesystem::copy_file(checkpoint, path, std::filesystem::copy_options::overwrite_existing);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, "data_tokens");
    H5Adelete(f, "data_documents");
    H5Fclose(f);
  });
  EXPECT_NO_THROW(resumed(older, "from-older", "stop")) << "a checkpoint without the counts";
}

TEST_F(CheckpointErrors, ACheckpointDirThatCannotBeADirectoryIsFoundBeforeTheFirstStep) {
  if (test::world_rank() == 0) std::ofstream(dir_ + "/a-file") << "x";
  MPI_Barrier(MPI_COMM_WORLD);
  engine::RunConfig c = config();
  c.output.dir = dir_;
  c.checkpoint.dir = "a-file/checkpoints";
  const std::string msg = test::collective_error([&] { engine::train(c, *grid_); });
  EXPECT_TRUE(has(msg, "checkpoint.dir: cannot create")) << msg;
}
