// Parameters written by their shards: each rank of a tensor group writes its boxes of every
// parameter (engine::param_shard; replicated tensors by tensor rank 0 alone) collectively into
// one file, at the global PyTorch shape. The file must hold exactly the gathered tensors
// (layers::gather_parameter, compared bit for bit), each rank must read its own shard back
// bit for bit, and a rank of another layout (one rank, the whole model) must read the whole
// tensors. The model has a vocabulary that is not a multiple of the padding, so the LM head's
// padding rows are exercised, and QKV's three parts; and one of 8, which pads to a single slice of
// the whole size: tensor rank 0 holds it all, the others padding only (each rank wrote the whole
// tensor before). Runs at 1, 2 and 4 ranks (tp = ranks).
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/param_shard.hpp"
#include "io/h5_file.hpp"
#include "io/parallel_h5.hpp"
#include "layers/gpt.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

layers::ModelConfig model(int vocab_size) {
  layers::ModelConfig m;
  m.vocab_size = vocab_size;
  m.seq_len = 8;
  m.n_layer = 2;
  m.n_head = 4;
  m.d_model = 16;
  m.tied_embeddings = false; // an LM head of its own, rows split and padded
  return m;
}

std::vector<float> host(const Kokkos::View<float*>& v) {
  auto h = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(h, v);
  return std::vector<float>(h.data(), h.data() + h.size());
}

} // namespace

class ParamShardsOfVocabulary : public ::testing::TestWithParam<int> {};

TEST_P(ParamShardsOfVocabulary, TensorShardsWriteTheGatheredTensorAndReadBack) {
  const int n = test::world_size(), vocab = GetParam();
  parallel::GridOptions o;
  o.layout = {1, 1, n};
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, o);
  const auto tp = grid.make_mpi_comm(parallel::Axis::tp);
  layers::GPT gpt(model(vocab), 1, 8, {}, tp.get());
  layers::init_parameters(gpt.params(), gpt.table(), 3);
  const int rank = tp->rank();
  // Each rank's shards scaled by its own factor, as training makes shards differ (replicated
  // tensors stay alike): a rank that writes or gathers elements it does not own shows up.
  std::vector<float> mine = host(gpt.params());
  const layers::ParamTable& t = gpt.table();
  for (const layers::ParamInfo& p : t.params) {
    if (p.split == layers::TpSplit::replicated) continue;
    for (std::size_t i = p.offset; i < p.offset + p.size; ++i)
      mine[i] *= float(1 + rank);
  }
  const std::string path = test::shared_path("param_shards");
  {
    io::ParallelFile f = io::ParallelFile::create(MPI_COMM_WORLD, path);
    for (const layers::ParamInfo& p : t.params) {
      const io::TensorShard s = p.split == layers::TpSplit::replicated && rank != 0
                                    ? engine::without_boxes(engine::param_shard(p, rank))
                                    : engine::param_shard(p, rank);
      f.write_shard(p.name, s, Span<const float>(mine.data() + p.offset, p.size));
    }
  }
  // The file holds the gathered tensors, bit for bit.
  std::vector<std::vector<float>> gathered;
  for (const layers::ParamInfo& p : t.params)
    gathered.push_back(layers::gather_parameter(p, mine.data() + p.offset, tp.get()));
  if (test::world_rank() == 0) {
    io::H5File file = io::H5File::open_read(path);
    for (std::size_t i = 0; i < t.params.size(); ++i) {
      const layers::ParamInfo& p = t.params[i];
      EXPECT_EQ(file.shape(p.name), p.shape) << p.name;
      std::vector<float> stored(gathered[i].size());
      file.read(p.name, stored.data(), stored.size());
      EXPECT_EQ(stored, gathered[i]) << p.name;
    }
  }
  // Each rank reads its own shard back; padding stays as it was (zero here).
  {
    io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_WORLD, path);
    std::vector<float> back(mine.size(), 0.0f);
    for (const layers::ParamInfo& p : t.params) {
      f.read_shard(p.name, engine::param_shard(p, rank),
                   Span<float>(back.data() + p.offset, p.size));
    }
    EXPECT_EQ(back, mine);
  }
  // Another layout: one rank holding the whole model reads whole tensors. The vocabulary's rows
  // are those of the rank that owns them: row r of tensor rank r / (padded slice).
  if (test::world_rank() == 0) {
    const parallel::Grid one = parallel::Grid::create(MPI_COMM_SELF, {});
    layers::GPT whole(model(vocab), 1, 8);
    layers::init_parameters(whole.params(), whole.table(), 3);
    const std::vector<float> init = host(whole.params());
    const layers::ParamTable& w = whole.table();
    const std::int64_t slice = layers::padded_vocab_slice(vocab, n);
    for (const int index : {w.wte, w.lm_head}) {
      const layers::ParamInfo& p = w.params[std::size_t(index)];
      io::H5File file = io::H5File::open_read(path);
      std::vector<float> stored(std::size_t(vocab * p.shape[1]));
      file.read(p.name, stored.data(), stored.size());
      for (std::size_t i = 0; i < stored.size(); ++i) {
        const float owner = float(1 + std::int64_t(i) / p.shape[1] / slice);
        ASSERT_EQ(stored[i], init[p.offset + i] * owner) << p.name << " element " << i;
      }
    }
    io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_SELF, path);
    std::vector<float> all(w.total, 0.0f);
    for (std::size_t i = 0; i < w.params.size(); ++i) {
      const layers::ParamInfo& p = w.params[i];
      f.read_shard(p.name, engine::param_shard(p, 0), Span<float>(all.data() + p.offset, p.size));
      EXPECT_EQ(layers::gather_parameter(p, all.data() + p.offset, nullptr), gathered[i]) << p.name;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::remove(path.c_str());
}

// 37 rows: 8 per rank and more, padded; 8 rows: a single padded slice holds them all.
INSTANTIATE_TEST_SUITE_P(Vocabularies, ParamShardsOfVocabulary, ::testing::Values(37, 8));

TEST(ParamShards, AShapeThatDoesNotMatchIsNamed) {
  const std::string path = test::shared_path("param_shape");
  layers::GPT gpt(model(37), 1, 8);
  const layers::ParamInfo& p = gpt.table().params[std::size_t(gpt.table().wte)];
  const std::vector<float> values(p.size, 1.0f);
  {
    io::ParallelFile f = io::ParallelFile::create(MPI_COMM_WORLD, path);
    io::TensorShard s = engine::param_shard(p, 0);
    if (test::world_rank() != 0) s = engine::without_boxes(s);
    f.write_shard(p.name, s, Span<const float>(values));
  }
  layers::ModelConfig wider = model(37);
  wider.d_model = 32;
  layers::GPT other(wider, 1, 8);
  const layers::ParamInfo& q = other.table().params[std::size_t(other.table().wte)];
  std::vector<float> out(q.size);
  const std::string msg = test::collective_error([&] {
    io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_WORLD, path);
    f.read_shard(q.name, engine::param_shard(q, 0), Span<float>(out));
  });
  EXPECT_NE(msg.find("dataset 'wte.weight' has shape [37, 16], where [37, 32] is needed"),
            std::string::npos)
      << msg;
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::remove(path.c_str());
}
