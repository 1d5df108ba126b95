// layers::AdamW on ZeRO-1 segments: a replica updates exactly the parameters it owns, to the
// bits of the whole-table update, and a replica that owns nothing (more replicas than a small
// chunk has parameters to share) updates nothing and keeps only its padded shard of state.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/dp_shards.hpp"
#include "layers/adamw.hpp"
#include "layers/parameters.hpp"

using namespace gridlm;

namespace {

layers::ParamTable small_table() {
  layers::ModelConfig m;
  m.vocab_size = 16;
  m.seq_len = 4;
  m.n_layer = 1;
  m.n_head = 2;
  m.d_model = 8;
  return layers::make_param_table(m);
}

// Deterministic, element-distinct values, so that a misplaced element shows.
std::vector<float> values(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = offset + scale * std::sin(0.37f * float(i) + 1.0f);
  return v;
}

Kokkos::View<float*> to_view(const std::vector<float>& v, const std::string& label) {
  Kokkos::View<float*> view(label, v.size());
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < v.size(); ++i)
    host(i) = v[i];
  Kokkos::deep_copy(view, host);
  return view;
}

std::vector<float> to_vector(const Kokkos::View<float*>& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<float>(host.data(), host.data() + host.size());
}

constexpr int steps = 3;
constexpr double lr = 1e-2, grad_norm = 0.5;

} // namespace

TEST(AdamW, ZeroSegmentsUpdateTheOwnedParametersAsTheWholeTableDoes) {
  const layers::ParamTable table = small_table();
  const std::vector<float> params0 = values(table.total, 0.1f, 0.0f);
  const std::vector<float> grads = values(table.total, 0.02f, 0.001f);
  layers::OptimizerConfig config;
  config.decay_norms_and_biases = false; // so that decayed and undecayed tensors both occur

  Kokkos::View<float*> whole_params = to_view(params0, "whole params");
  layers::AdamW whole(config, table);
  const Kokkos::View<float*> whole_grads = to_view(grads, "whole grads");
  for (int s = 0; s < steps; ++s)
    whole.update(whole_params, whole_grads, s, lr, grad_norm);
  const std::vector<float> expected = to_vector(whole_params);

  for (int dp : {2, 3, 5}) {
    for (int rank = 0; rank < dp; ++rank) {
      SCOPED_TRACE("dp " + std::to_string(dp) + ", replica " + std::to_string(rank));
      // Buckets of 24 elements: several per table, the last a remainder.
      const engine::ChunkShards shards = engine::plan_shards(table.total, 24, dp, rank);
      std::vector<layers::AdamWSegment> segments;
      std::vector<float> shard_grads(shards.state_size, 0.0f);
      std::vector<bool> owned(table.total, false);
      for (const engine::ShardPiece& p : shards.pieces) {
        if (p.own_size == 0) continue;
        segments.push_back({p.own_begin, p.state, p.own_size});
        for (std::size_t i = 0; i < p.own_size; ++i) {
          shard_grads[p.state + i] = grads[p.own_begin + i];
          owned[p.own_begin + i] = true;
        }
      }
      Kokkos::View<float*> mine = to_view(params0, "shard params");
      layers::AdamW adamw(config, table, segments, shards.state_size);
      // Both moments (floats) and whether decay applies (a byte), per element of the shard.
      EXPECT_EQ(adamw.state_bytes(), shards.state_size * (2 * sizeof(float) + 1));
      const Kokkos::View<float*> g = to_view(shard_grads, "shard grads");
      for (int s = 0; s < steps; ++s)
        adamw.update(mine, g, s, lr, grad_norm);
      const std::vector<float> got = to_vector(mine);
      for (std::size_t i = 0; i < table.total; ++i) {
        const float want = owned[i] ? expected[i] : params0[i];
        ASSERT_EQ(got[i], want) << "element " << i << (owned[i] ? " (owned)" : " (not owned)");
      }
    }
  }
}

TEST(AdamW, AReplicaThatOwnsNothingUpdatesNothingAndHoldsItsShardOnly) {
  const layers::ParamTable table = small_table();
  // One bucket of the whole table over total - 1 replicas: blocks of 2 elements, so the
  // replicas past the middle own none.
  const int dp = int(table.total) - 1;
  const engine::ChunkShards shards = engine::plan_shards(table.total, 0, dp, dp - 1);
  ASSERT_EQ(shards.pieces.size(), 1u);
  ASSERT_EQ(shards.pieces[0].own_size, 0u);
  ASSERT_GT(shards.state_size, 0u);

  const std::vector<float> params0 = values(table.total, 0.1f, 0.0f);
  Kokkos::View<float*> params = to_view(params0, "params");
  layers::AdamW adamw(layers::OptimizerConfig{}, table, {}, shards.state_size);
  EXPECT_TRUE(adamw.segments().empty());
  EXPECT_EQ(adamw.state_bytes(), shards.state_size * (2 * sizeof(float) + 1))
      << "the whole table's state is " << table.total * (2 * sizeof(float) + 1) << " bytes";
  const Kokkos::View<float*> grads = to_view(std::vector<float>(shards.state_size, 1.0f), "grads");
  adamw.update(params, grads, 0, lr, grad_norm);
  EXPECT_EQ(to_vector(params), params0);
}
