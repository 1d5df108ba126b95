// The per-rank memory estimate and the up-front refusal.
#include "engine/memory_budget.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "gridlm/version.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/pipeline_plan.hpp"
#include "parallel/schedule.hpp"

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

// `boundary_buffers`: the most stage transfer buffers (B x T x C floats) a stage holds at once.
MemoryEstimate estimate_with_transfers(const RunConfig& config, const parallel::Layout& layout,
                                       int boundary_buffers) {
  // Doubles throughout: the point is to refuse sizes whose byte counts overflow integers.
  const auto& m = config.model;
  const double C = m.d_model, V = m.vocab_size, T = m.seq_len, H = m.n_head;
  const double tp = layout.tp, pp = layout.pp, dp = layout.dp;
  const double B = config.train.micro_batch;
  const double blocks = std::ceil(double(m.n_layer) / pp);
  const double embedding = (V * C + T * C) / tp;
  const double block_params = blocks * (12 * C * C + 13 * C) / tp;
  const double params = embedding + block_params + 2 * C;
  MemoryEstimate e;
  e.weights = 4 * params;
  e.gradients = 4 * params;
  e.optimizer = 8 * params / (config.parallel.zero == 1 ? dp : 1);
  // Saved per block and micro-batch: about 20 C per token, and the attention matrix (H/tp x T x
  // T per sequence); the head keeps logits and their gradient (2 V/tp per token).
  const double in_flight = std::min(pp * config.parallel.chunks, double(config.train.grad_accum));
  const double per_block = B * T * (20 * C / tp + 2 * H / tp * T);
  const double head = 2 * B * T * V / tp;
  const double activation_bytes = 4 * in_flight * blocks * per_block, head_bytes = 4 * head;
  // bf16 products: the rounded weight of one product (the head's is the largest) and the
  // rounded residual gradient.
  const double bf16_bytes =
      config.train.precision == "bf16" ? 4 * (std::max(4 * C * C, V * C) / tp + B * T * C) : 0.0;
  e.activations = activation_bytes + head_bytes + bf16_bytes;
  // A stage's transfers and hand-overs between chunks, B x T x C floats each, as many as the
  // executor holds at once for the schedule (training or validation) and its posting.
  e.transfers = boundary_buffers * 4 * B * T * C;
  // Weights, gradients and both moments: 16 bytes per parameter.
  const double embedding_bytes = 16 * embedding + head_bytes;
  const double block_bytes = 16 * block_params;
  if (e.transfers > std::max({embedding_bytes, block_bytes, activation_bytes})) {
    e.largest =
        fmt::format("the pipeline's stage transfers (train.grad_accum = {} micro-batches "
                    "of train.micro_batch = {} x parallel.chunks = {}, "
                    "their receives posted at the step's start): lower the batch per replica "
                    "(raise parallel.dp for the same global batch) or parallel.chunks",
                    config.train.grad_accum, config.train.micro_batch, config.parallel.chunks);
  } else if (embedding_bytes >= block_bytes && embedding_bytes >= activation_bytes) {
    e.largest = fmt::format("the token embedding and logits (model.vocab_size = {} x "
                            "model.d_model = {}): lower model.vocab_size, or split it over more "
                            "ranks with parallel.tp",
                            m.vocab_size, m.d_model);
  } else if (block_bytes >= activation_bytes) {
    e.largest = fmt::format("the blocks' weights and optimizer state (model.n_layer = {} x "
                            "model.d_model = {} squared): lower them, or split them over more "
                            "ranks with parallel.tp, parallel.pp or parallel.zero = 1",
                            m.n_layer, m.d_model);
  } else {
    e.largest = fmt::format("the activations (train.micro_batch = {} x model.seq_len = {}): "
                            "lower train.micro_batch (raise train.grad_accum to keep the batch)",
                            config.train.micro_batch, m.seq_len);
  }
  return e;
}

} // namespace

MemoryEstimate estimate_memory(const RunConfig& config, const parallel::Layout& layout,
                               bool nccl_transfers) {
  // No pipeline, no transfers: nothing to plan.
  if (layout.pp == 1 && config.parallel.chunks == 1)
    return estimate_with_transfers(config, layout, 0);
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
  return estimate_with_transfers(config, layout, plan.boundary_buffers);
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
