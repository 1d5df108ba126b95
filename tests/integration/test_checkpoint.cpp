// Checkpoints: a run of 2N steps and a run of N steps resumed for N more give the same losses,
// gradient norms and final weights, bit for bit, under the same layout (one rank at 1; dp 2,
// tp 2 and pp 2 with zb-h1 at 2; the synthetic source, a dataset file, and tensors large enough
// to go by O_DIRECT). Resuming under other layouts and --init-from: test_checkpoint_layouts;
// bad checkpoints: test_checkpoint_errors. Registered at 1 and 2 ranks.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "engine/trainer.hpp"
#include "io/h5_file.hpp"
#include "layers/parameters.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

engine::RunConfig config(const std::string& dir, int steps, int micro_batch) {
  engine::RunConfig c;
  c.model.vocab_size = 304;
  c.model.seq_len = 16;
  c.model.n_layer = 4;
  c.model.n_head = 2;
  c.model.d_model = 16;
  c.train.micro_batch = micro_batch;
  c.train.grad_accum = 4;
  c.train.steps = steps;
  c.train.log_every = 100;
  c.train.optim.lr = 1e-2;
  c.train.optim.warmup_steps = 2;
  c.train.optim.decay_steps = 8; // the full run's length, whatever this run's
  c.output.dir = dir;
  c.output.metrics = "";
  c.output.weights = "model.h5";
  c.checkpoint.dir = "checkpoints";
  return c;
}

// Every parameter of two weights files, bit for bit (rank 0).
void expect_same_weights(const engine::RunConfig& c, const std::string& a, const std::string& b) {
  if (test::world_rank() != 0) return;
  io::H5File fa = io::H5File::open_read(a), fb = io::H5File::open_read(b);
  for (const layers::ParamInfo& p : layers::make_param_table(c.model).params) {
    std::size_t n = 1;
    for (auto d : p.shape)
      n *= std::size_t(d);
    std::vector<float> x(n), y(n);
    fa.read(p.name, x.data(), n);
    fb.read(p.name, y.data(), n);
    EXPECT_EQ(x, y) << p.name;
  }
}

// 8 steps at once against 4, then 4 more resumed from the checkpoint, in one layout. `tweak`
// changes the configuration of all three runs. Returns the split runs' metrics.jsonl, if any.
std::string check_exact_resume(const parallel::GridOptions& layout, MPI_Comm comm, int micro_batch,
                               const std::string& data, const std::string& schedule = "1f1b",
                               const std::function<void(engine::RunConfig&)>& tweak = {}) {
  test::SharedDir full("ckpt_full"), split("ckpt_split");
  auto with = [&](engine::RunConfig c) {
    c.data.source = data;
    c.parallel.schedule = schedule;
    if (tweak) tweak(c);
    return c;
  };
  const parallel::Grid grid = parallel::Grid::create(comm, layout);
  const engine::TrainResult whole = engine::train(with(config(full.path, 8, micro_batch)), grid);
  engine::train(with(config(split.path, 4, micro_batch)), grid);
  engine::RunConfig resume = with(config(split.path, 8, micro_batch));
  resume.checkpoint.resume = "auto";
  const engine::TrainResult rest = engine::train(resume, grid);
  EXPECT_EQ(rest.losses.size(), 4u);
  for (std::size_t s = 0; s < 4 && s < rest.losses.size(); ++s)
    EXPECT_EQ(rest.losses[s], whole.losses[4 + s]) << "step " << 4 + s;
  expect_same_weights(resume, full.path + "/model.h5", split.path + "/model.h5");
  if (resume.output.metrics.empty()) return "";
  std::ifstream metrics(split.path + "/" + resume.output.metrics);
  return std::string(std::istreambuf_iterator<char>(metrics), {});
}

parallel::GridOptions layout(int dp, int pp, int tp) {
  parallel::GridOptions o;
  o.layout = {dp, pp, tp};
  return o;
}

} // namespace

// The layouts of the world's ranks: one rank at 1, dp 2, tp 2 and pp 2 with zb-h1 at 2.
TEST(Checkpoint, ResumeIsBitwiseExact) {
  const int n = test::world_size();
  ASSERT_LE(n, 2) << "register at 1 and 2 ranks";
  if (n == 1) check_exact_resume({}, MPI_COMM_WORLD, 4, "synthetic");
  if (n == 2) {
    check_exact_resume(layout(2, 1, 1), MPI_COMM_WORLD, 2, "synthetic");
    check_exact_resume(layout(1, 1, 2), MPI_COMM_WORLD, 4, "synthetic");
    check_exact_resume(layout(1, 2, 1), MPI_COMM_WORLD, 4, "synthetic", "zb-h1");
  }
}

// Tensors of 1 MiB or more go by O_DIRECT (io::DirectFile): at a vocabulary of 16384 and width
// 32, wte and its moments are 2 MiB, 1 MiB a tensor rank at tp 2. The same bits come back.
TEST(Checkpoint, ResumeIsBitwiseExactThroughDirectIo) {
  const int n = test::world_size();
  auto wide = [](engine::RunConfig& c) {
    c.model.vocab_size = 16384;
    c.model.d_model = 32;
    c.output.metrics = "metrics.jsonl";
  };
  std::vector<std::string> metrics;
  if (n == 1)
    metrics.push_back(check_exact_resume({}, MPI_COMM_WORLD, 4, "synthetic", "1f1b", wide));
  if (n == 2) {
    metrics.push_back(
        check_exact_resume(layout(1, 1, 2), MPI_COMM_WORLD, 4, "synthetic", "1f1b", wide));
    metrics.push_back(
        check_exact_resume(layout(1, 2, 1), MPI_COMM_WORLD, 4, "synthetic", "1f1b", wide));
  }
  // Rank 0 writes metrics: each save there went direct for the most part.
  for (const std::string& text : metrics) {
    if (test::world_rank() != 0) continue;
    std::size_t saves = 0;
    for (std::size_t at = text.find("\"checkpoint_bytes\":"); at != std::string::npos;
         at = text.find("\"checkpoint_bytes\":", at + 1)) {
      const double bytes = std::stod(text.substr(at + 19));
      const std::size_t d = text.find("\"checkpoint_direct_bytes\":", at); // keys sorted
      ASSERT_NE(d, std::string::npos) << text;
      EXPECT_GT(std::stod(text.substr(d + 26)), 0.5 * bytes) << text;
      ++saves;
    }
    EXPECT_GE(saves, 2u) << text;
  }
}

TEST(Checkpoint, ResumeIsBitwiseExactOnADatasetFile) {
  const int n = test::world_size();
  const std::string data = test::shared_path("ckpt_data");
  test::write_synthetic_dataset(data, 120, 0);
  if (n == 1) check_exact_resume({}, MPI_COMM_WORLD, 4, data);
  if (n == 2) {
    check_exact_resume(layout(2, 1, 1), MPI_COMM_WORLD, 2, data);
    check_exact_resume(layout(1, 1, 2), MPI_COMM_WORLD, 4, data);
    check_exact_resume(layout(1, 2, 1), MPI_COMM_WORLD, 4, data, "zb-h1");
  }
  test::remove_on_rank0(data);
}
