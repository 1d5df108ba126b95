// The memory estimate made before anything is allocated (engine::estimate_memory: what
// `gridlm plan --auto` ranks layouts by and what the start-up refuses a run by) equals the
// start-up report's total on the largest rank, byte for byte, in every layout of the ranks the
// test runs on and with what changes a rank's buffers: schedules (gpipe holds every
// micro-batch, zb-h1 keeps output gradients, interleaving holds chunks), stage layouts,
// ZeRO-1's shards and pad, bf16's scratch, tied copies on two stages, a padded vocabulary.
// Runs at 1, 2, 3 and 4 ranks (at 3, ZeRO-1's buckets do not divide by dp: the pad buffer).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/memory_budget.hpp"
#include "engine/trainer.hpp"
#include "parallel/grid.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;

namespace {

engine::RunConfig base_config() {
  engine::RunConfig c;
  c.model.vocab_size = 37; // padded rows at every tensor-parallel size
  c.model.seq_len = 16;
  c.model.n_layer = 4;
  c.model.n_head = 4;
  c.model.d_model = 32;
  c.train.micro_batch = 2;
  c.train.grad_accum = 4;
  c.train.steps = 1;
  c.train.log_every = 100;
  c.output.dir = "";
  c.output.metrics = "";
  c.output.weights = "";
  return c;
}

struct Variant {
  std::string name;
  void (*apply)(engine::RunConfig&);
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all{
      {"1f1b", [](engine::RunConfig&) {}},
      {"gpipe untied bf16",
       [](engine::RunConfig& c) {
         c.parallel.schedule = "gpipe";
         c.model.tied_embeddings = false;
         c.train.precision = "bf16";
       }},
      {"zb-h1 balanced ZeRO-1 small buckets",
       [](engine::RunConfig& c) {
         c.parallel.schedule = "zb-h1";
         c.parallel.stage_layout = "balanced";
         c.parallel.zero = 1;
         c.parallel.grad_bucket_mb = 1000.0 * 4 / (1 << 20);
       }},
      {"interleaved 2 chunks ZeRO-1 one bucket",
       [](engine::RunConfig& c) {
         c.parallel.schedule = "interleaved-1f1b";
         c.parallel.chunks = 2;
         c.parallel.zero = 1;
         c.parallel.grad_bucket_mb = 0;
       }},
  };
  return all;
}

} // namespace

TEST(MemoryEstimate, EqualsTheStartUpReportInEveryLayout) {
  const int n = test::world_size();
  int checked = 0;
  for (int tp = 1; tp <= n; tp *= 2) {
    for (int pp = 1; pp * tp <= n; pp *= 2) {
      if (n % (pp * tp) != 0) continue;
      const parallel::Layout layout{n / (pp * tp), pp, tp};
      for (const Variant& v : variants()) {
        engine::RunConfig c = base_config();
        v.apply(c);
        if (c.parallel.chunks > 1 && (pp == 1 || c.model.n_layer < pp * c.parallel.chunks))
          continue;
        parallel::GridOptions o;
        o.layout = {layout.dp, layout.pp, layout.tp};
        const engine::TrainResult r = engine::train(c, parallel::Grid::create(MPI_COMM_WORLD, o));
        const engine::MemoryEstimate e = engine::estimate_memory(c, layout);
        EXPECT_GT(r.memory_per_rank, 0.0);
        EXPECT_DOUBLE_EQ(e.total(), r.memory_per_rank)
            << v.name << " at " << layout.str() << ": estimated weights " << e.weights
            << ", gradients " << e.gradients << ", optimizer " << e.optimizer << ", activations "
            << e.activations << ", transfers " << e.transfers;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 3);
}
