// The training loop.
#include "app/trainer.hpp"

#include "app/comm_backend.hpp"
#include "app/pipeline.hpp"
#include "app/stage_layout.hpp"
#include "app/trace.hpp"
#include "app/weights_file.hpp"

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
#include "io/prefetcher.hpp"
#include "io/synthetic_source.hpp"
#include "io/token_dataset.hpp"
#include "layers/adamw.hpp"
#include "layers/gpt.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/schedule_transfers.hpp"

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

// Collective: the dataset file data.source names, checked against the model; `split` picks the
// training or the validation tokens.
std::unique_ptr<io::TokenDataset> open_dataset(const RunConfig& config, const parallel::Grid& grid,
                                               io::Split split) {
  io::TokenDatasetOptions options;
  options.sample_length = config.model.seq_len + 1;
  options.seed = std::uint64_t(config.data.seed);
  options.split = split;
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
  PipelineOptions pipe_options;
  std::string pp_backend = "mpi", pp_note;
  parallel::run_agreed(grid.comm(), [&] {
    if (dump && grid.size() != 1) {
      throw Error("output.reference_dump is a single-rank testing aid; run it on one rank");
    }
    // A step's micro-batches are the pipeline's: train.grad_accum of them per replica.
    schedule = parallel::make_schedule(parallel::parse_schedule(config.parallel.schedule),
                                       grid.layout().pp, accum, config.parallel.chunks);
    pipe_options.stage_blocks = plan_stage_blocks(mc, grid.layout().pp * config.parallel.chunks,
                                                  config.parallel.stage_layout);
    // NCCL carries stage transfers only in per-op groups, which must be proven deadlock-free
    // for the schedule; MPI carries them otherwise.
    if (backend == "nccl" && grid.layout().pp > 1) {
      const std::string problem = parallel::check_grouped_transfers(schedule);
      if (problem.empty()) {
        pp_backend = "nccl";
        pipe_options.grouped_transfers = true;
      } else {
        pp_note = fmt::format(" (stage transfers over MPI: {})", problem);
      }
    }
    if (config.data.source == "synthetic") {
      source =
          std::make_unique<io::SyntheticSource>(mc.vocab_size, std::uint64_t(config.data.seed));
    }
    if (root) make_directory(config.output.dir);
  });
  // Validation reads the dataset's validation split, or the synthetic language from sample 2^40
  // on (far from any training sample). Either way the same samples every time.
  std::unique_ptr<io::TokenSource> valid_source;
  std::uint64_t valid_base = std::uint64_t(1) << 40;
  std::string tokenizer_bytes; // stored with the weights, for gridlm sample
  if (!source) {
    auto train_set = open_dataset(config, grid, io::Split::train);
    if (grid.rank() == 0) tokenizer_bytes = train_set->tokenizer().model_bytes();
    source = std::move(train_set);
    if (tc.eval_every > 0) {
      valid_source = open_dataset(config, grid, io::Split::valid);
      valid_base = 0;
    }
  }
  const io::TokenSource& valid = valid_source ? *valid_source : *source;
  const std::string trace_path = config.output.trace.empty() || config.output.trace.front() == '/'
                                     ? config.output.trace
                                     : config.output.dir + "/" + config.output.trace;
  TraceRecorder trace(grid, trace_path.empty() ? 0 : config.output.trace_steps);
  pipe_options.trace = &trace;
  pipe_options.eval_micro_batches = tc.eval_batches;
  // The same path for every layout: one rank is a one-stage pipeline.
  // Over MPI, the pipeline's own MPI pp communicator carries the transfers too.
  Pipeline pipe(mc, B, T, grid, schedule, tp_comm.get(), pipe_options,
                pp_backend == "mpi" ? nullptr
                                    : make_axis_comm(grid, parallel::Axis::pp, pp_backend));
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
  // Stages differ (embedding, head, activation slots): rank 0 reports the largest too.
  struct {
    double bytes;
    int rank;
  } mine{double(mem.weights + mem.gradients + mem.optimizer + mem.activations), grid.rank()},
      largest{};
  GRIDLM_MPI_CHECK(MPI_Reduce(&mine, &largest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, 0, grid.comm()));
  const layers::GPT& first = *pipe.chunks().front();

  if (root) {
    std::printf("gridlm train: %d ranks = %s; model %d layers, %d heads, width %d, vocab %d, "
                "context %d: %.2f M parameters\n",
                grid.size(), grid.layout().str().c_str(), mc.n_layer, mc.n_head, mc.d_model,
                mc.vocab_size, mc.seq_len, double(layers::make_param_table(mc).total) / 1e6);
    std::printf("data: %s\n", source->describe().c_str());
    std::printf("communication: %s%s\n", backend.c_str(), pp_note.c_str());
    std::printf("batch: %d sequences x %d tokens x %d micro-batches x %d replicas = %d tokens "
                "per step; MFU against %.1f GFLOP/s per rank (train.peak_gflops)\n",
                B, T, accum, dp, B * T * accum * dp, tc.peak_gflops);
    if (grid.layout().pp > 1) {
      const parallel::Timeline tl = parallel::simulate(schedule, {});
      std::printf("pipeline: %s, %d stages x %d chunk(s), %d micro-batches, blocks per virtual "
                  "stage %s; predicted bubble %.1f%% (uniform costs)\n",
                  parallel::schedule_name(schedule.kind), schedule.stages, schedule.chunks,
                  schedule.micro_batches, stage_blocks_text(pipe.stage_blocks()).c_str(),
                  100.0 * tl.bubble);
    }
    std::printf("memory per rank (rank 0): %.2f M parameters; weights %s, gradients %s, "
                "optimizer state %s, activations %s (micro-batch %d x %d, %d in flight x %d "
                "chunk(s)); total %s\n",
                double(local_params) / 1e6, bytes(mem.weights).c_str(),
                bytes(mem.gradients).c_str(), bytes(mem.optimizer).c_str(),
                bytes(mem.activations).c_str(), B, T, pipe.chunks().front()->slots(),
                int(pipe.chunks().size()),
                bytes(mem.weights + mem.gradients + mem.optimizer + mem.activations).c_str());
    if (grid.size() > 1) {
      const parallel::Coords at = grid.coords_of(largest.rank);
      std::printf("memory, largest rank: %s on rank %d (dp %d, pp %d, tp %d)\n",
                  bytes(std::size_t(largest.bytes)).c_str(), largest.rank, at.dp, at.pp, at.tp);
    }
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

  // Validation: the same held-out samples every time, split over the replicas, loss averaged.
  // They are few: read once now, before the prefetch thread takes the file over.
  const bool reads_tokens = pipe.needs_tokens();
  const std::size_t sample_tokens = std::size_t(T) + 1;
  std::vector<std::int32_t> valid_tokens;
  if (tc.eval_every > 0 && reads_tokens) {
    valid_tokens.resize(std::size_t(tc.eval_batches) * std::size_t(B) * sample_tokens);
    for (int micro = 0; micro < tc.eval_batches; ++micro) {
      const std::uint64_t at =
          valid_base + (std::uint64_t(micro) * dp + replica) * std::uint64_t(B);
      for (int b = 0; b < B; ++b) {
        valid.sample(valid_tokens.data() + (std::size_t(micro) * B + b) * sample_tokens, at + b,
                     T + 1);
      }
    }
  }
  auto validate = [&] {
    auto valid_samples = [&](int micro, std::vector<std::int32_t>& seq) {
      const auto from =
          valid_tokens.begin() + std::ptrdiff_t(std::size_t(micro) * B * sample_tokens);
      std::copy(from, from + std::ptrdiff_t(B * sample_tokens), seq.begin());
    };
    std::vector<double> loss{pipe.evaluate(valid_samples)};
    if (dp > 1) dp_comm->all_reduce(Span<double>(loss));
    return loss[0] / dp;
  };
  // Training batches are read ahead on a background thread (on the ranks whose stages take
  // tokens): batch n = step x accum + micro holds samples ((n x dp + replica) x B ...).
  std::unique_ptr<io::Prefetcher> prefetch;
  if (reads_tokens) {
    prefetch = std::make_unique<io::Prefetcher>(
        *source,
        [dp, replica, B](long n) { return (std::uint64_t(n) * dp + replica) * std::uint64_t(B); },
        B, T + 1, 2 * accum, accum);
  }

  const double flops_per_step = layers::flops_per_token(mc) * double(B) * T * accum * dp;
  const double tokens_per_step = double(B) * T * accum * dp;
  std::vector<double> rates;
  TrainResult result;
  for (int step = 0; step < tc.steps; ++step) {
    const auto t0 = Clock::now();
    trace.set_step(step);
    const double comm_before = pipe.comm_seconds();
    for (auto& chunk : pipe.chunks())
      chunk->zero_grad();
    const double data_wait_before = prefetch ? prefetch->waited() : 0.0;
    auto samples = [&](int micro, std::vector<std::int32_t>& seq) {
      seq = prefetch->get(long(step) * accum + micro);
      if (dump) ref.batches.insert(ref.batches.end(), seq.begin(), seq.end());
    };
    std::vector<double> micro_losses;
    double loss = pipe.step(samples, 1.0f / float(accum * dp),
                            dump && step == 0 ? ref.logits.data() : nullptr, &micro_losses);
    if (dump && step == 0) ref.first_loss = float(micro_losses.at(0));
    // Gradients summed over replicas: each already carries its 1/(accum * dp) share.
    if (dp > 1) {
      const double sync_start = steady_seconds();
      for (auto& chunk : pipe.chunks()) {
        dp_comm->all_reduce(Span<float>(chunk->grads().data(), chunk->grads().size()));
      }
      std::vector<double> total{loss};
      dp_comm->all_reduce(Span<double>(total));
      loss = total[0] / dp;
      trace.add(TraceKind::grad_sync, sync_start, steady_seconds());
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
    const double optimizer_start = steady_seconds();
    for (std::size_t c = 0; c < optimizers.size(); ++c) {
      optimizers[c]->update(pipe.chunks()[c]->params(), pipe.chunks()[c]->grads(), step, lr,
                            grad_norm);
    }
    Kokkos::fence();
    trace.add(TraceKind::optimizer, optimizer_start, steady_seconds());
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const double step_comm = pipe.comm_seconds() - comm_before;
    const double data_wait = prefetch ? prefetch->waited() - data_wait_before : 0.0;
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
    double val_loss = std::nan("");
    if (tc.eval_every > 0 && ((step + 1) % tc.eval_every == 0 || step == tc.steps - 1)) {
      val_loss = validate();
      result.val_losses.emplace_back(step, val_loss);
    }
    if (root) {
      if (std::isfinite(val_loss)) {
        std::printf("step %5d/%d | validation loss %.4f (%d x %d sequences)\n", step + 1, tc.steps,
                    val_loss, tc.eval_batches * dp, B);
      }
      if (metrics.is_open()) {
        nlohmann::json j{{"step", step},
                         {"loss", loss},
                         {"grad_norm", grad_norm},
                         {"lr", lr},
                         {"tokens_per_s", rate},
                         {"ms_per_step", seconds * 1e3},
                         {"mfu", mfu},
                         {"comm_wait_ms", step_comm * 1e3},
                         {"data_wait_ms", data_wait * 1e3}};
        if (std::isfinite(val_loss)) j["val_loss"] = val_loss;
        if (grid.layout().pp > 1) {
          j["bubble"] = pipe.last_timing().bubble;
          j["bubble_predicted"] = pipe.last_timing().predicted_bubble;
        }
        metrics << j.dump() << "\n";
        metrics.flush();
      }
      if (step % tc.log_every == 0 || step == tc.steps - 1) {
        std::string comm = grid.layout().tp > 1 || grid.layout().pp > 1
                               ? fmt::format(" | comm wait {:.1f} ms", step_comm * 1e3)
                               : std::string();
        if (grid.layout().pp > 1) {
          comm += fmt::format(" | bubble {:.1f}% (simulated {:.1f}%)",
                              100.0 * pipe.last_timing().bubble,
                              100.0 * pipe.last_timing().predicted_bubble);
        }
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
  prefetch.reset(); // HDF5 is not thread-safe: the reader thread ends before files are written
  if (!config.output.weights.empty()) {
    const std::string path = config.output.dir + "/" + config.output.weights;
    write_weights(path, pipe, config, tp_comm.get(), grid, tokenizer_bytes);
    if (root) std::printf("weights: %s\n", path.c_str());
  }
  if (root && dump) ref.write(config.output.reference_dump, config, first);
  trace.write(trace_path);
  if (root && !trace_path.empty()) std::printf("trace: %s\n", trace_path.c_str());
  return result;
}

} // namespace gridlm::app
