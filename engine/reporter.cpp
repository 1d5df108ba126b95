// The start-up report, the per-step log and the metrics lines.
#include "engine/reporter.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layers/parameters.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/stage_layout.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::engine {
namespace {

std::string bytes(std::size_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", double(b) / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(b) / double(1ull << 20));
  return fmt::format("{:.1f} KiB", double(b) / 1024.0);
}

} // namespace

Reporter::Reporter(const RunConfig& config, const RunPlan& plan, const parallel::Grid& grid,
                   bool metrics)
    : config_(config), plan_(plan), grid_(grid) {
  const auto& t = config.train;
  const double per_step =
      double(t.micro_batch) * config.model.seq_len * t.grad_accum * grid.layout().dp;
  flops_per_step_ = layers::flops_per_token(config.model) * per_step;
  tokens_per_step_ = per_step;
  metrics_wanted_ = grid.rank() == 0 && metrics && !plan.metrics_path.empty();
}

void Reporter::open_metrics(int steps) {
  if (!metrics_wanted_) return;
  if (plan_.resume_path.empty()) {
    metrics_.open(plan_.metrics_path, std::ios::trunc);
    if (!metrics_) abort_job(fmt::format("cannot write metrics file '{}'", plan_.metrics_path));
  } else {
    // A run resumed from a checkpoint older than its last logged step (after a crash) runs
    // those steps again: their earlier lines go, so that metrics.jsonl has each step once.
    keep_metrics_until(steps);
  }
}

double Reporter::startup(const PipelineModel& model, const io::TokenSource& data,
                         std::size_t optimizer_bytes, std::size_t reduction_bytes) {
  layers::MemoryReport mem = model.memory();
  mem.optimizer = optimizer_bytes;
  mem.gradients += reduction_bytes;
  // Stage transfers take their buffers during the step: as many as the plan counts held at once.
  const std::size_t transfers = std::size_t(plan_.pipeline.boundary_buffers) *
                                model.chunks().front()->boundary_size() * sizeof(float);
  // The tied embedding's gradient crosses the pipeline through two host copies of it.
  const std::size_t tied = model.executor().tied_exchange_bytes();
  const std::size_t total =
      mem.weights + mem.gradients + mem.optimizer + mem.activations + transfers + tied;
  // Stages differ (embedding, head, activation slots): rank 0 reports the largest too, the
  // lowest rank among equals.
  parallel::MpiComm all(parallel::borrow_comm(grid_.comm()));
  std::vector<double> largest{double(total)};
  all.all_reduce(Span<double>(largest), parallel::ReduceOp::max);
  std::vector<int> largest_rank{double(total) == largest[0] ? grid_.rank() : INT_MAX};
  all.all_reduce(Span<int>(largest_rank), parallel::ReduceOp::min);
  if (grid_.rank() != 0) return largest[0];

  const auto& mc = config_.model;
  const auto& tc = config_.train;
  const int B = tc.micro_batch, T = mc.seq_len, dp = grid_.layout().dp;
  std::printf("gridlm train: %d ranks = %s; model %d layers, %d heads, width %d, vocab %d, "
              "context %d: %.2f M parameters\n",
              grid_.size(), grid_.layout().str().c_str(), mc.n_layer, mc.n_head, mc.d_model,
              mc.vocab_size, mc.seq_len, double(layers::make_param_table(mc).total) / 1e6);
  std::printf("data: %s\n", data.describe().c_str());
  const std::string note =
      plan_.pipeline.transfers_note.empty()
          ? std::string()
          : " (stage transfers over MPI: " + plan_.pipeline.transfers_note + ")";
  std::printf("communication: %s%s; %s\n", plan_.backend.c_str(), note.c_str(),
              parallel::describe_wait_policy().c_str());
  std::printf("precision: %s\n",
              tc.precision == "bf16"
                  ? "bf16 (matrix products read bf16 operands and accumulate in fp32; weights, "
                    "moments, norms, softmax and loss in fp32)"
                  : "fp32");
  std::printf("batch: %d sequences x %d tokens x %d micro-batches x %d replicas = %d tokens "
              "per step; MFU against %.1f GFLOP/s per rank (train.peak_gflops)\n",
              B, T, tc.grad_accum, dp, B * T * tc.grad_accum * dp, tc.peak_gflops);
  if (tc.eval_every > 0) {
    // Its cost: eval_batches global batches forward, as many micro-batches as eval_batches
    // training steps' forwards.
    std::printf("validation: every %d steps and after the last, train.eval_batches = %d global "
                "batches (%lld sequences), in forward-only steps of %d micro-batches\n",
                tc.eval_every, tc.eval_batches,
                static_cast<long long>(tc.eval_batches * global_batch(tc, dp)),
                plan_.pipeline.eval.micro_batches);
  }
  const parallel::Schedule& schedule = plan_.pipeline.train;
  if (grid_.layout().pp > 1) {
    std::printf("pipeline: %s, %d stages x %d chunk(s), %d micro-batches, blocks per virtual "
                "stage %s; predicted bubble %.1f%% (uniform costs)\n",
                parallel::schedule_name(schedule.kind), schedule.stages, schedule.chunks,
                schedule.micro_batches, parallel::stage_blocks_text(model.stage_blocks()).c_str(),
                100.0 * plan_.pipeline.uniform.bubble);
  }
  std::string transfer_note =
      transfers > 0 ? fmt::format(", stage transfers up to {}", bytes(transfers)) : "";
  if (tied > 0) transfer_note += fmt::format(", tied-embedding exchange {}", bytes(tied));
  std::printf("memory per rank (rank 0): %.2f M parameters; weights %s, gradients %s, "
              "optimizer state %s, activations %s (micro-batch %d x %d, %d in flight x %d "
              "chunk(s))%s; total %s\n",
              double(model.parameters()) / 1e6, bytes(mem.weights).c_str(),
              bytes(mem.gradients).c_str(), bytes(mem.optimizer).c_str(),
              bytes(mem.activations).c_str(), B, T, model.chunks().front()->slots(),
              int(model.chunks().size()), transfer_note.c_str(), bytes(total).c_str());
  if (grid_.size() > 1) {
    const parallel::Coords at = grid_.coords_of(largest_rank[0]);
    std::printf("memory, largest rank: %s on rank %d (dp %d, pp %d, tp %d)\n",
                bytes(std::size_t(largest[0])).c_str(), largest_rank[0], at.dp, at.pp, at.tp);
  }
  std::fflush(stdout);
  return largest[0];
}

nlohmann::json Reporter::metrics_record(const StepRecord& r, double rate, double mfu) const {
  const parallel::Layout& layout = grid_.layout();
  // Steps are counted from 1, as the log, train.skip_steps and checkpoint names count them.
  nlohmann::json j{{"step", r.step + 1},
                   {"loss", r.loss},
                   {"grad_norm", r.grad_norm},
                   {"lr", r.lr},
                   {"tokens_per_s", rate},
                   {"ms_per_step", r.seconds * 1e3},
                   {"mfu", mfu},
                   {"comm_wait_ms", r.comm_seconds * 1e3},
                   {"comm_exposed_ms", (r.comm_seconds + r.dp_exposed) * 1e3},
                   {"data_wait_ms", r.data_wait * 1e3}};
  if (layout.dp > 1) {
    j["dp_comm_ms"] = r.dp_in_flight * 1e3;
    j["dp_exposed_ms"] = r.dp_exposed * 1e3;
    j["dp_buckets"] = r.dp_buckets;
    j["dp_buckets_overlapped"] = r.dp_buckets_overlapped;
    if (config_.parallel.zero == 1) {
      j["dp_gather_ms"] = r.dp_gather * 1e3;
      j["dp_gather_exposed_ms"] = r.dp_gather_exposed * 1e3;
    }
  }
  if (r.validated) j["val_loss"] = r.val_loss;
  j["bad_steps"] = r.bad_steps;
  if (!r.bad.empty()) j["bad_step"] = r.bad;
  if (!r.action.empty()) {
    j["action"] = r.action;
    j["samples"] = {r.samples.first, r.samples.second};
  }
  if (r.rolled_back_from >= 0) {
    j["rolled_back_from"] = r.rolled_back_from + 1;
    j["rolled_back_for"] = r.rolled_back_for;
  }
  if (!r.checkpoint_error.empty()) j["checkpoint_error"] = r.checkpoint_error;
  if (!r.checkpoint_path.empty()) {
    j["checkpoint_s"] = r.checkpoint_seconds;
    j["checkpoint_bytes"] = r.checkpoint_bytes;
    j["checkpoint_staging_bytes"] = r.checkpoint_staging;
    j["checkpoint_direct_bytes"] = r.checkpoint_direct;
  }
  if (layout.pp > 1) {
    j["bubble"] = r.pipeline.bubble;
    j["bubble_predicted"] = r.pipeline.predicted_bubble;
  }
  return j;
}

double Reporter::step(const StepRecord& r) {
  // A step train.skip_steps dropped read its batches and computed nothing: no rate (NaN, null
  // in the metrics).
  const bool dropped = r.action == "skip_steps";
  const double none = std::nan("");
  const double rate = dropped ? none : tokens_per_step_ / r.seconds;
  if (grid_.rank() != 0) return rate;
  const auto& tc = config_.train;
  const parallel::Layout& layout = grid_.layout();
  const double mfu =
      dropped ? none : flops_per_step_ / r.seconds / (tc.peak_gflops * 1e9 * grid_.size());
  if (r.validated) {
    std::printf("step %5d/%d | validation loss %.4f (%lld sequences)\n", r.step + 1, tc.steps,
                r.val_loss, static_cast<long long>(tc.eval_batches * global_batch(tc, layout.dp)));
  }
  if (metrics_.is_open()) {
    metrics_ << metrics_record(r, rate, mfu).dump() << "\n";
    metrics_.flush();
  }
  if (!r.event.empty()) std::printf("step %5d/%d | %s\n", r.step + 1, tc.steps, r.event.c_str());
  if (!r.checkpoint_path.empty()) {
    std::printf("step %5d/%d | checkpoint %s: %.1f MiB in %.2f s (%.0f MiB/s; %.1f MiB direct; "
                "host staging %.1f MiB on the largest rank)\n",
                r.step + 1, tc.steps, r.checkpoint_path.c_str(),
                double(r.checkpoint_bytes) / (1 << 20), r.checkpoint_seconds,
                double(r.checkpoint_bytes) / (1 << 20) / std::max(r.checkpoint_seconds, 1e-9),
                double(r.checkpoint_direct) / (1 << 20), double(r.checkpoint_staging) / (1 << 20));
  }
  // Steps 1, n, 2n, ...: beside the validations and checkpoints of the same multiples.
  const int step = r.step + 1;
  if (!dropped && (step == 1 || step % tc.log_every == 0 || step == tc.steps)) {
    std::string comm = layout.tp > 1 || layout.pp > 1
                           ? fmt::format(" | comm wait {:.1f} ms", r.comm_seconds * 1e3)
                           : std::string();
    if (layout.dp > 1) {
      comm += fmt::format(" | dp reduce {:.1f} ms, {:.1f} exposed", r.dp_in_flight * 1e3,
                          r.dp_exposed * 1e3);
    }
    if (layout.pp > 1) {
      comm += fmt::format(" | bubble {:.1f}% (simulated {:.1f}%)", 100.0 * r.pipeline.bubble,
                          100.0 * r.pipeline.predicted_bubble);
    }
    std::printf("step %5d/%d | loss %.4f | grad norm %.3f | lr %.2e | %8.0f tok/s | %7.1f ms "
                "| MFU %.1f%%%s\n",
                r.step + 1, tc.steps, r.loss, r.grad_norm, r.lr, rate, r.seconds * 1e3, 100.0 * mfu,
                comm.c_str());
    std::fflush(stdout);
  }
  return rate;
}

void Reporter::rolled_back(int bad_step, const std::string& why, const std::string& path, int steps,
                           std::uint64_t samples_seen) {
  if (grid_.rank() != 0) return;
  std::printf("step %5d/%d | %s: rolled back to %s (train.on_nonfinite = rollback); steps from "
              "%d go on with the samples from %llu\n",
              bad_step + 1, config_.train.steps, why.c_str(), path.c_str(), steps + 1,
              static_cast<unsigned long long>(samples_seen));
  std::fflush(stdout);
  if (metrics_.is_open()) keep_metrics_until(steps);
}

void Reporter::keep_metrics_until(int steps) {
  metrics_.close();
  std::vector<std::string> kept;
  {
    std::ifstream in(plan_.metrics_path); // none yet: nothing to keep
    // A file of an earlier gridlm counts steps from 0: renumbered from 1 as it is kept, so that
    // the lines this run appends continue it.
    int shift = -1;
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("step")) continue;
      if (shift < 0) shift = j["step"].get<int>() == 0 ? 1 : 0;
      if (shift > 0) {
        j["step"] = j["step"].get<int>() + shift;
        if (j.contains("rolled_back_from"))
          j["rolled_back_from"] = j["rolled_back_from"].get<int>() + shift;
        line = j.dump();
      }
      if (j["step"].get<int>() <= steps) kept.push_back(line);
    }
  }
  // Through a link to the file it names, which stays a link.
  std::error_code ec;
  std::string path = plan_.metrics_path;
  if (std::filesystem::is_symlink(path, ec)) {
    const std::filesystem::path target = std::filesystem::canonical(path, ec);
    if (!ec) path = target.string();
  }
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    for (const std::string& line : kept)
      out << line << "\n";
    out.flush();
    if (!out) abort_job(fmt::format("cannot write metrics file '{}'", partial));
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) abort_job(fmt::format("cannot rename '{}' to '{}': {}", partial, path, ec.message()));
  metrics_.open(plan_.metrics_path, std::ios::app);
  if (!metrics_) abort_job(fmt::format("cannot write metrics file '{}'", plan_.metrics_path));
}

void Reporter::resumed(const std::string& path, const CheckpointMeta& meta, double seconds) {
  if (grid_.rank() != 0) return;
  std::printf("resumed from %s: %d steps done, %llu samples seen (written by %s); read in %.3f s\n",
              path.c_str(), meta.step, static_cast<unsigned long long>(meta.samples_seen),
              meta.layout.c_str(), seconds);
  std::fflush(stdout);
}

void Reporter::wrote(const char* what, const std::string& path) const {
  if (grid_.rank() == 0 && !path.empty()) std::printf("%s: %s\n", what, path.c_str());
}

void Reporter::note(const std::string& line) const {
  if (grid_.rank() == 0 && !line.empty()) std::printf("%s\n", line.c_str());
}

} // namespace gridlm::engine
