// The per-rank memory estimate and the up-front refusal.
#include "engine/memory_budget.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "engine/dp_shards.hpp"
#include "engine/pipeline_model.hpp"
#include "gridlm/version.hpp"
#include "layers/gpt.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/pipeline_plan.hpp"
#include "parallel/schedule.hpp"
#include "parallel/stage_layout.hpp"

namespace gridlm::engine {
namespace {

std::string gib(double b) { return fmt::format("{:.2f} GiB", b / double(1ull << 30)); }

} // namespace

double node_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0;
}

namespace {

// What makes a stage's memory: its parameters' four copies (weights, gradients, both moments)
// split into the embedding and head's and the blocks', its activations, its transfers.
struct StageParts {
  MemoryEstimate e;
  double embedding_bytes = 0, block_bytes = 0;
  double logits_bytes = 0; // of the activations: the head's logits, one set per slot
};

// A chunk as layers::GPT::planned_memory counts it. Blocks weigh alike, so a chunk of k blocks
// is the chunk without blocks plus k times one block's share: a model of a million blocks is
// priced by two plans instead of a million-block one (the refusal must be quick).
layers::MemoryReport chunk_memory(const RunConfig& config, const parallel::Layout& layout,
                                  const parallel::PipelinePlan& plan, int stage,
                                  const layers::StageSpec& spec) {
  const auto& m = config.model;
  const auto planned = [&](int blocks) {
    layers::StageSpec s = spec;
    s.last_block = s.first_block + blocks;
    return layers::GPT::planned_memory(
        m, config.train.micro_batch, m.seq_len, s, layout.tp, plan.slots[std::size_t(stage)],
        plan.split_backward ? layers::Backward::split : layers::Backward::fused,
        parse_precision(config.train.precision));
  };
  const std::size_t k = std::size_t(spec.last_block - spec.first_block);
  if (k <= 1) return planned(int(k));
  const layers::MemoryReport none = planned(0), one = planned(1);
  layers::MemoryReport r;
  r.weights = none.weights + k * (one.weights - none.weights);
  r.gradients = none.gradients + k * (one.gradients - none.gradients);
  r.activations = none.activations + k * (one.activations - none.activations);
  return r;
}

// Pipeline stage `stage` as the engine builds it: its chunks' models planned with the plan's
// slots and backward (layers::GPT::planned_memory, the start-up report's own accounting), the
// optimizer's state and ZeRO-1's buffers as GradSync lays them out, the stage transfers the
// plan holds at once and the tied embedding's exchange.
StageParts estimate_stage(const RunConfig& config, const parallel::Layout& layout,
                          const parallel::PipelinePlan& plan, const std::vector<int>& first,
                          int stage) {
  const auto& m = config.model;
  const int pp = layout.pp, Q = int(first.size()) - 1, B = config.train.micro_batch;
  const bool zero = config.parallel.zero == 1 && layout.dp > 1;
  const std::size_t bucket = bucket_elements(config.parallel.grad_bucket_mb);
  StageParts s;
  bool tied_copy = false;
  for (int q = stage; q < Q; q += pp) {
    const layers::StageSpec spec{first[std::size_t(q)], first[std::size_t(q) + 1], q == 0,
                                 q == Q - 1};
    const layers::MemoryReport r = chunk_memory(config, layout, plan, stage, spec);
    const std::size_t params = r.weights / sizeof(float);
    s.e.weights += double(r.weights);
    s.e.gradients += double(r.gradients);
    s.e.activations += double(r.activations);
    // AdamW: two moments (floats) and whether decay applies (a byte) per element of its state.
    std::size_t state = params;
    if (zero) {
      const ShardSizes shards = shard_sizes(params, bucket, layout.dp);
      state = shards.state;
      s.e.gradients += 4.0 * double(shards.state + shards.pad);
    }
    s.e.optimizer += 9.0 * double(state);
    // The chunk without its blocks: the embeddings, the head and the final LayerNorm.
    const layers::StageSpec ends{spec.first_block, spec.first_block, spec.embedding, spec.head};
    const double embedding = double(layers::make_param_table(m, ends, 0, layout.tp).total);
    s.embedding_bytes += 16.0 * embedding;
    if (spec.head) {
      s.logits_bytes += 4.0 * plan.slots[std::size_t(stage)] * B * m.seq_len *
                        double(layers::padded_vocab_slice(m.vocab_size, layout.tp));
    }
    s.block_bytes += 16.0 * (double(params) - embedding);
    tied_copy = tied_copy || (m.tied_embeddings && Q > 1 && (spec.embedding || spec.head));
  }
  s.e.transfers = double(plan.boundary_buffers) * 4.0 * B * m.seq_len * m.d_model;
  if (tied_copy) {
    s.e.transfers +=
        2.0 * 4.0 * double(layers::padded_vocab_slice(m.vocab_size, layout.tp)) * m.d_model;
  }
  return s;
}

MemoryEstimate estimate_with_plan(const RunConfig& config, const parallel::Layout& layout,
                                  const parallel::PipelinePlan& plan) {
  const auto& m = config.model;
  // Sizes past what an index can count are refused before anything is planned by them.
  const double B = config.train.micro_batch, T = m.seq_len;
  const double params = double(m.vocab_size) * m.d_model + T * m.d_model +
                        double(m.n_layer) * 12.0 * double(m.d_model) * m.d_model;
  const double values = B * T * (double(m.vocab_size) + double(m.n_head) * T);
  if (params > 1e15 || values > 1e15) {
    MemoryEstimate e;
    e.weights = e.gradients = 4 * params;
    e.optimizer = 9 * params;
    e.activations = 4 * values;
    e.largest =
        fmt::format("the model itself (model.vocab_size = {}, model.n_layer = {}, "
                    "model.d_model = {}, model.seq_len = {}, train.micro_batch = {}): "
                    "far past any machine",
                    m.vocab_size, m.n_layer, m.d_model, m.seq_len, config.train.micro_batch);
    return e;
  }
  const int Q = layout.pp * config.parallel.chunks;
  const std::vector<int> blocks =
      parallel::plan_stage_blocks(layers::stage_cost_model(m), Q, config.parallel.stage_layout);
  std::vector<int> first{0};
  for (int n : blocks)
    first.push_back(first.back() + n);
  // Stages alike (the same blocks per chunk, slots, embedding or head) weigh alike: a layout
  // of hundreds of stages has a few kinds, and the planner prices thousands of layouts.
  std::map<std::vector<int>, StageParts> kinds;
  StageParts big;
  for (int stage = 0; stage < layout.pp; ++stage) {
    std::vector<int> kind{plan.slots[std::size_t(stage)], stage == 0, stage == layout.pp - 1};
    for (int q = stage; q < Q; q += layout.pp)
      kind.push_back(blocks[std::size_t(q)]);
    auto it = kinds.find(kind);
    if (it == kinds.end())
      it = kinds.emplace(kind, estimate_stage(config, layout, plan, first, stage)).first;
    if (stage == 0 || it->second.e.total() > big.e.total()) big = it->second;
  }
  MemoryEstimate e = big.e;
  // What the vocabulary sizes (the embedding, the head and its logits) against the rest.
  const double vocab = big.embedding_bytes + big.logits_bytes,
               activations = e.activations - big.logits_bytes;
  if (e.transfers > std::max({vocab, big.block_bytes, activations})) {
    e.largest =
        fmt::format("the pipeline's stage transfers (train.grad_accum = {} micro-batches "
                    "of train.micro_batch = {} x parallel.chunks = {}, "
                    "their receives posted at the step's start): lower the batch per replica "
                    "(raise parallel.dp for the same global batch) or parallel.chunks",
                    config.train.grad_accum, config.train.micro_batch, config.parallel.chunks);
  } else if (vocab >= big.block_bytes && vocab >= activations) {
    e.largest = fmt::format("the token embedding, the LM head and its logits (model.vocab_size "
                            "= {} x model.d_model = {}, and x train.micro_batch = {} x "
                            "model.seq_len = {}): lower model.vocab_size, or split it over more "
                            "ranks with parallel.tp",
                            m.vocab_size, m.d_model, config.train.micro_batch, m.seq_len);
  } else if (big.block_bytes >= activations) {
    e.largest = fmt::format("the blocks' weights and optimizer state (model.n_layer = {} x "
                            "model.d_model = {} squared): lower them, or split them over more "
                            "ranks with parallel.tp, parallel.pp or parallel.zero = 1",
                            m.n_layer, m.d_model);
  } else {
    e.largest =
        fmt::format("the activations (train.micro_batch = {} x model.seq_len = {} "
                    "through model.n_layer = {} blocks over parallel.pp = {} stages, "
                    "with the logits over model.vocab_size = {}): lower "
                    "train.micro_batch (raise train.grad_accum to keep the batch)",
                    config.train.micro_batch, m.seq_len, m.n_layer, layout.pp, m.vocab_size);
  }
  return e;
}

} // namespace

MemoryEstimate estimate_memory(const RunConfig& config, const parallel::Layout& layout,
                               bool nccl_transfers) {
  const parallel::Schedule s =
      parallel::make_schedule(parallel::parse_schedule(config.parallel.schedule), layout.pp,
                              config.train.grad_accum, config.parallel.chunks);
  const parallel::PipelinePlan plan = parallel::plan_pipeline(
      s, parallel::validation_micro_batches(s),
      nccl_transfers ? parallel::Transfers::grouped_if_proven : parallel::Transfers::up_front);
  return estimate_memory(config, layout, plan);
}

MemoryEstimate estimate_memory(const RunConfig& config, const parallel::Layout& layout,
                               const parallel::PipelinePlan& plan) {
  return estimate_with_plan(config, layout, plan);
}

void check_memory_fits(const RunConfig& config, const parallel::Grid& grid) {
  if (build::cuda) return;
  int node_ranks = 1;
  GRIDLM_MPI_CHECK(MPI_Comm_size(grid.node_comm(), &node_ranks));
  parallel::run_agreed(grid.comm(), [&] {
    const MemoryEstimate e = estimate_memory(config, grid.layout());
    const double available = node_available_bytes();
    if (available <= 0 || e.total() <= available / node_ranks) return;
    throw Error(fmt::format("memory: this run needs about {} per rank (weights {}, gradients {}, "
                            "optimizer state {}, activations {}, stage transfers {}), but this "
                            "node has {} available for its {} rank(s); the largest part is {}",
                            gib(e.total()), gib(e.weights), gib(e.gradients), gib(e.optimizer),
                            gib(e.activations), gib(e.transfers), gib(available), node_ranks,
                            e.largest));
  });
}

} // namespace gridlm::engine
