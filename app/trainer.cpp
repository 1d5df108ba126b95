// The training loop.
#include "app/trainer.hpp"

#include "app/comm_backend.hpp"
#include "app/pipeline.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/h5_file.hpp"
#include "io/synthetic_source.hpp"
#include "io/token_dataset.hpp"
#include "layers/adamw.hpp"
#include "layers/gpt.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::app {
namespace {

using Clock = std::chrono::steady_clock;

std::string bytes(std::size_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", double(b) / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(b) / double(1ull << 20));
  return fmt::format("{:.1f} KiB", double(b) / 1024.0);
}

void make_directory(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create output.dir '{}': {}", dir, ec.message()));
}

// The model's shape as attributes, so a file says what it holds without gridlm.
void write_model_attributes(io::H5File& f, const layers::ModelConfig& m) {
  const std::pair<const char*, double> attrs[] = {
      {"vocab_size", m.vocab_size}, {"seq_len", m.seq_len}, {"n_layer", m.n_layer},
      {"n_head", m.n_head},         {"d_model", m.d_model}, {"tied_embeddings", m.tied_embeddings}};
  for (const auto& [name, value] : attrs)
    f.attribute(name, value);
}

// Everything the PyTorch reference test needs to replay a single-rank run.
struct ReferenceRecord {
  std::vector<float> initial_params;
  std::vector<std::int32_t> batches; // [steps, accum, B, T+1]
  std::vector<float> logits;         // [B, T, V] of step 0, micro-batch 0
  float first_loss = 0.0f;
  std::vector<float> step0_grads;
  std::vector<float> losses;

  void write(const std::string& path, const RunConfig& c, const layers::GPT& gpt) const {
    io::H5File f = io::H5File::create(path);
    const auto& m = c.model;
    const auto& t = c.train;
    const auto& o = t.optim;
    write_model_attributes(f, m);
    const std::pair<const char*, double> attrs[] = {
        {"micro_batch", t.micro_batch},
        {"accum", t.grad_accum},
        {"steps", t.steps},
        {"lr", o.lr},
        {"min_lr", o.min_lr},
        {"warmup_steps", o.warmup_steps},
        {"total_steps", o.total_steps},
        {"beta1", o.beta1},
        {"beta2", o.beta2},
        {"eps", o.eps},
        {"weight_decay", o.weight_decay},
        {"decay_embeddings", o.decay_embeddings},
        {"decay_norms_and_biases", o.decay_norms_and_biases},
        {"grad_clip", o.grad_clip}};
    for (const auto& [name, value] : attrs)
      f.attribute(name, value);
    for (const layers::ParamInfo& p : gpt.table().params) {
      // Global shape, padding rows dropped (one rank: no group to gather from).
      f.write("params/" + p.name, p.shape,
              layers::gather_parameter(p, initial_params.data() + p.offset, nullptr).data());
      f.write("step0/grads/" + p.name, p.shape,
              layers::gather_parameter(p, step0_grads.data() + p.offset, nullptr).data());
    }
    f.write("batches", {t.steps, t.grad_accum, t.micro_batch, m.seq_len + 1}, batches.data());
    f.write("step0/logits", {t.micro_batch, m.seq_len, m.vocab_size}, logits.data());
    f.write("step0/loss", {}, &first_loss);
    f.write("losses", {t.steps}, losses.data());
    f.commit();
  }
};

// Collective over the grid: each tensor is gathered over its tensor group, sent from the
// pipeline stage that holds it to rank 0, and written there at its global shape.
void write_weights(const std::string& path, Pipeline& pipe, const RunConfig& c, parallel::Comm* tp,
                   const parallel::Grid& grid) {
  // Every tensor of this rank's chunks at its global shape, by name.
  std::map<std::string, std::vector<float>> mine;
  for (auto& chunk : pipe.chunks()) {
    auto host = Kokkos::create_mirror_view(chunk->params());
    Kokkos::deep_copy(host, chunk->params());
    for (const layers::ParamInfo& p : chunk->table().params) {
      auto global = layers::gather_parameter(p, host.data() + p.offset, tp);
      mine.emplace(p.name, std::move(global));
    }
  }
  // Only the (dp 0, tp 0) rank of each stage takes part in the transfer to rank 0.
  if (grid.coords().dp != 0 || grid.coords().tp != 0) return;
  auto pp = grid.make_mpi_comm(parallel::Axis::pp);
  const layers::ParamTable all = layers::make_param_table(c.model);
  std::vector<std::vector<float>> received(all.params.size());
  std::vector<parallel::Request> requests;
  for (std::size_t i = 0; i < all.params.size(); ++i) {
    const layers::ParamInfo& info = all.params[i];
    const int from = pipe.stage_of(info);
    if (from == 0) continue;
    if (pp->rank() == from) {
      requests.push_back(pp->isend(Span<const float>(mine.at(info.name)), 0, int(i)));
    } else if (pp->rank() == 0) {
      std::size_t n = 1;
      for (auto d : info.shape)
        n *= std::size_t(d);
      received[i].resize(n);
      requests.push_back(pp->irecv(Span<float>(received[i]), from, int(i)));
    }
  }
  for (auto& r : requests)
    r.wait();
  if (grid.rank() != 0) return;
  io::H5File f = io::H5File::create(path);
  for (std::size_t i = 0; i < all.params.size(); ++i) {
    const layers::ParamInfo& info = all.params[i];
    const std::vector<float>& data = pipe.stage_of(info) == 0 ? mine.at(info.name) : received[i];
    f.write(info.name, info.shape, data.data());
  }
  f.attribute("format", "gridlm weights v1: one dataset per parameter, PyTorch names and shapes");
  write_model_attributes(f, c.model);
  f.commit();
}

// Collective: the dataset file data.source names, checked against the model.
std::unique_ptr<io::TokenSource> open_dataset(const RunConfig& config, const parallel::Grid& grid) {
  io::TokenDatasetOptions options;
  options.sample_length = config.model.seq_len + 1;
  options.seed = std::uint64_t(config.data.seed);
  auto dataset = std::make_unique<io::TokenDataset>(grid.comm(), config.data.source, options);
  parallel::run_agreed(grid.comm(), [&] {
    if (dataset->vocab_size() > config.model.vocab_size) {
      throw Error(fmt::format("dataset '{}' has a vocabulary of {} tokens but model.vocab_size = "
                              "{}: the model must have a row for every token id; set "
                              "model.vocab_size = {} (or more)",
                              config.data.source, dataset->vocab_size(), config.model.vocab_size,
                              dataset->vocab_size()));
    }
  });
  return dataset;
}

} // namespace

TrainResult train(const RunConfig& config, const parallel::Grid& grid) {
  const bool root = grid.rank() == 0;
  const auto& mc = config.model;
  const auto& tc = config.train;
  const int B = tc.micro_batch, T = mc.seq_len, accum = tc.grad_accum;
  const int dp = grid.layout().dp, replica = grid.coords().dp;
  const bool dump = !config.output.reference_dump.empty();

  std::string backend;
  parallel::run_agreed(grid.comm(), [&] { backend = resolve_backend(config.parallel.backend); });
  std::unique_ptr<parallel::Comm> tp_comm = make_axis_comm(grid, parallel::Axis::tp, backend);
  std::unique_ptr<io::TokenSource> source;
  parallel::Schedule schedule;
  parallel::run_agreed(grid.comm(), [&] {
    if (dump && grid.size() != 1) {
      throw Error("output.reference_dump is a single-rank testing aid; run it on one rank");
    }
    // A step's micro-batches are the pipeline's: train.grad_accum of them per replica.
    schedule = parallel::make_schedule(parallel::parse_schedule(config.parallel.schedule),
                                       grid.layout().pp, accum, config.parallel.chunks);
    if (config.data.source == "synthetic") {
      source =
          std::make_unique<io::SyntheticSource>(mc.vocab_size, std::uint64_t(config.data.seed));
    }
    if (root) make_directory(config.output.dir);
  });
  if (!source) source = open_dataset(config, grid);
  // The same path for every layout: one rank is a one-stage pipeline.
  // Stage-to-stage transfers stay on MPI for every backend: the executor posts all receives
  // of a step up front, which NCCL's in-order stream would serialise into a deadlock; NCCL
  // needs the transfers grouped per op first.
  Pipeline pipe(mc, B, T, grid, schedule, tp_comm.get());
  std::vector<std::unique_ptr<layers::AdamW>> optimizers;
  layers::MemoryReport mem;
  std::size_t local_params = 0;
  for (auto& chunk : pipe.chunks()) {
    layers::init_parameters(chunk->params(), chunk->table(), std::uint64_t(tc.seed));
    optimizers.push_back(std::make_unique<layers::AdamW>(tc.optim, chunk->table()));
    const layers::MemoryReport m = chunk->memory();
    mem.weights += m.weights;
    mem.gradients += m.gradients;
    mem.activations += m.activations;
    mem.optimizer += optimizers.back()->state_bytes();
    local_params += chunk->table().total;
  }
  auto dp_comm = make_axis_comm(grid, parallel::Axis::dp, backend);
  const layers::GPT& first = *pipe.chunks().front();

  if (root) {
    std::printf("gridlm train: %d ranks = %s; model %d layers, %d heads, width %d, vocab %d, "
                "context %d: %.2f M parameters\n",
                grid.size(), grid.layout().str().c_str(), mc.n_layer, mc.n_head, mc.d_model,
                mc.vocab_size, mc.seq_len, double(layers::make_param_table(mc).total) / 1e6);
    std::printf("data: %s\n", source->describe().c_str());
    std::printf("communication: %s\n", backend.c_str());
    std::printf("batch: %d sequences x %d tokens x %d micro-batches x %d replicas = %d tokens "
                "per step; MFU against %.1f GFLOP/s per rank (train.peak_gflops)\n",
                B, T, accum, dp, B * T * accum * dp, tc.peak_gflops);
    if (grid.layout().pp > 1) {
      const parallel::Timeline tl = parallel::simulate(schedule, {});
      std::printf("pipeline: %s, %d stages x %d chunk(s), %d micro-batches; predicted bubble "
                  "%.1f%% (uniform costs)\n",
                  parallel::schedule_name(schedule.kind), schedule.stages, schedule.chunks,
                  schedule.micro_batches, 100.0 * tl.bubble);
    }
    std::printf("memory per rank (rank 0): %.2f M parameters; weights %s, gradients %s, "
                "optimizer state %s, activations %s (micro-batch %d x %d); total %s\n",
                double(local_params) / 1e6, bytes(mem.weights).c_str(),
                bytes(mem.gradients).c_str(), bytes(mem.optimizer).c_str(),
                bytes(mem.activations).c_str(), B, T,
                bytes(mem.weights + mem.gradients + mem.optimizer + mem.activations).c_str());
    std::fflush(stdout);
  }

  std::ofstream metrics;
  if (root && !config.output.metrics.empty()) {
    const std::string path = config.output.dir + "/" + config.output.metrics;
    metrics.open(path, std::ios::trunc);
    if (!metrics) abort_job(fmt::format("cannot write metrics file '{}'", path));
  }

  ReferenceRecord ref;
  if (dump) {
    ref.initial_params.resize(first.table().total);
    auto host = Kokkos::create_mirror_view(first.params());
    Kokkos::deep_copy(host, first.params());
    std::copy(host.data(), host.data() + host.size(), ref.initial_params.begin());
    ref.batches.reserve(std::size_t(tc.steps) * accum * B * (T + 1));
    ref.logits.resize(std::size_t(B) * T * mc.vocab_size);
  }

  const double flops_per_step = layers::flops_per_token(mc) * double(B) * T * accum * dp;
  const double tokens_per_step = double(B) * T * accum * dp;
  std::vector<double> rates;
  TrainResult result;
  for (int step = 0; step < tc.steps; ++step) {
    const auto t0 = Clock::now();
    const double comm_before = pipe.comm_seconds();
    for (auto& chunk : pipe.chunks())
      chunk->zero_grad();
    auto samples = [&](int micro, std::vector<std::int32_t>& seq) {
      const std::uint64_t first_sample =
          ((std::uint64_t(step) * accum + micro) * dp + replica) * std::uint64_t(B);
      for (int b = 0; b < B; ++b) {
        source->sample(seq.data() + std::size_t(b) * (T + 1), first_sample + b, T + 1);
      }
      if (dump) ref.batches.insert(ref.batches.end(), seq.begin(), seq.end());
    };
    std::vector<double> micro_losses;
    double loss = pipe.step(samples, 1.0f / float(accum * dp),
                            dump && step == 0 ? ref.logits.data() : nullptr, &micro_losses);
    if (dump && step == 0) ref.first_loss = float(micro_losses.at(0));
    // Gradients summed over replicas: each already carries its 1/(accum * dp) share.
    if (dp > 1) {
      for (auto& chunk : pipe.chunks()) {
        dp_comm->all_reduce(Span<float>(chunk->grads().data(), chunk->grads().size()));
      }
      std::vector<double> total{loss};
      dp_comm->all_reduce(Span<double>(total));
      loss = total[0] / dp;
    }
    if (dump && step == 0) {
      ref.step0_grads.resize(first.table().total);
      auto host = Kokkos::create_mirror_view(first.grads());
      Kokkos::deep_copy(host, first.grads());
      std::copy(host.data(), host.data() + host.size(), ref.step0_grads.begin());
    }
    if (dump) ref.losses.push_back(float(loss));
    // Split tensors contribute their shards, replicated ones once, over pp and tp.
    const double grad_norm = std::sqrt(pipe.grad_norm_squared(tp_comm.get()));
    const double lr = layers::learning_rate(tc.optim, step);
    for (std::size_t c = 0; c < optimizers.size(); ++c) {
      optimizers[c]->update(pipe.chunks()[c]->params(), pipe.chunks()[c]->grads(), step, lr,
                            grad_norm);
    }
    Kokkos::fence();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const double step_comm = pipe.comm_seconds() - comm_before;
    const double rate = tokens_per_step / seconds;
    if (step > 0) rates.push_back(rate);
    const double mfu = flops_per_step / seconds / (tc.peak_gflops * 1e9 * grid.size());
    if (step == 0) result.first_loss = loss;
    result.losses.push_back(loss);
    result.last_loss = loss;
    if (!std::isfinite(loss)) {
      abort_job(
          fmt::format("loss is {} at step {}: training diverged; lower train.lr", loss, step));
    }
    if (root) {
      if (metrics.is_open()) {
        nlohmann::json j{{"step", step},
                         {"loss", loss},
                         {"grad_norm", grad_norm},
                         {"lr", lr},
                         {"tokens_per_s", rate},
                         {"ms_per_step", seconds * 1e3},
                         {"mfu", mfu},
                         {"comm_wait_ms", step_comm * 1e3}};
        metrics << j.dump() << "\n";
        metrics.flush();
      }
      if (step % tc.log_every == 0 || step == tc.steps - 1) {
        const std::string comm = grid.layout().tp > 1 || grid.layout().pp > 1
                                     ? fmt::format(" | comm wait {:.1f} ms", step_comm * 1e3)
                                     : std::string();
        std::printf("step %5d/%d | loss %.4f | grad norm %.3f | lr %.2e | %8.0f tok/s | %7.1f ms "
                    "| MFU %.1f%%%s\n",
                    step + 1, tc.steps, loss, grad_norm, lr, rate, seconds * 1e3, 100.0 * mfu,
                    comm.c_str());
        std::fflush(stdout);
      }
    }
  }
  if (!rates.empty()) {
    std::sort(rates.begin(), rates.end());
    result.tokens_per_s = rates[rates.size() / 2];
  }
  if (!config.output.weights.empty()) {
    const std::string path = config.output.dir + "/" + config.output.weights;
    write_weights(path, pipe, config, tp_comm.get(), grid);
    if (root) std::printf("weights: %s\n", path.c_str());
  }
  if (root && dump) ref.write(config.output.reference_dump, config, first);
  return result;
}

} // namespace gridlm::app
