// The run's decisions, each taken once.
#include "engine/run_plan.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "engine/comm_backend.hpp"
#include "engine/memory_budget.hpp"
#include "layers/model_config.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/stage_layout.hpp"

namespace gridlm::engine {
namespace {

void make_directory(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    throw Error(
        fmt::format("output.dir '{}' is a file, not a directory; give a directory path", dir));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create output.dir '{}': {}", dir, ec.message()));
}

parallel::ScheduleKind schedule_kind(const std::string& name) {
  try {
    return parallel::parse_schedule(name);
  } catch (const Error& e) {
    throw Error(std::string("parallel.schedule: ") + e.what());
  }
}

// "" when a file can be created and removed at `probe`, else the reason.
std::string write_problem(const std::string& probe) {
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr || std::fclose(f) != 0) return std::strerror(errno);
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  return "";
}

// Rank 0 checks the checkpoint directory now, not at the first save: created if missing, and
// a file written and removed in it.
void check_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(fmt::format("checkpoint.dir: cannot create '{}': {}; choose a writable directory",
                            dir, ec.message()));
  }
  const std::string problem = write_problem(dir + "/.gridlm-write-test");
  if (!problem.empty()) {
    throw Error(fmt::format("checkpoint.dir: '{}' is not writable ({}); choose a writable "
                            "directory",
                            dir, problem));
  }
}

// Rank 0 checks each output file before step 1, so that a bad path cannot cost the trained
// weights: not a directory, and its directory exists (made if missing) and takes a new file.
void check_output_file(const std::string& key, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw Error(fmt::format("{} = '{}' is a directory; give a file name", key, path));
  }
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec || (!parent.empty() && !fs::is_directory(parent))) {
    throw Error(fmt::format("{} = '{}': cannot make its directory '{}' ({}); give a path in a "
                            "writable directory",
                            key, path, parent.string(),
                            ec ? ec.message() : "a file of that name exists"));
  }
  const std::string problem = write_problem(path + ".gridlm-write-test");
  if (!problem.empty()) {
    throw Error(fmt::format("{} = '{}': cannot write in its directory ({}); give a path in a "
                            "writable directory",
                            key, path, problem));
  }
}

// Whether `path` (what `what` names) exists; one that cannot be looked at (a loop of links, a
// name too long, a folder without permission) is an error that says why.
bool exists_or_error(const std::string& path, const std::string& what) {
  std::error_code ec;
  const bool found = std::filesystem::exists(path, ec);
  if (ec) {
    throw Error(fmt::format("{} '{}' cannot be looked at: {}; give a path that can", what, path,
                            ec.message()));
  }
  return found;
}

// Rank 0's reading of checkpoint.resume: "auto" is the file `latest` names, or "" when there is
// no `latest` yet (a fresh start); a path must exist.
std::string resolve_resume(const std::string& spec, const std::string& dir) {
  if (spec.empty()) return "";
  if (spec != "auto") {
    if (!exists_or_error(spec, "--resume")) {
      throw Error(fmt::format("--resume '{}': no such checkpoint; give a checkpoint file, or "
                              "--resume auto for the newest in checkpoint.dir",
                              spec));
    }
    return spec;
  }
  // No `latest`: a first run. One that cannot be read, or names nothing, is not: starting again
  // from step 0 would quietly redo a finished part of the run and prune its checkpoints.
  std::error_code ec;
  if (!std::filesystem::exists(latest_file(dir), ec) && !ec) return "";
  std::ifstream latest(latest_file(dir));
  std::string name;
  if (!latest || !std::getline(latest, name) || name.empty()) {
    throw Error(fmt::format("'{}' cannot be read or names no checkpoint (an interrupted save on a "
                            "file system without ordered writes?); point --resume at a "
                            "checkpoint file of '{}', or remove '{}' to start from step 0",
                            latest_file(dir), dir, latest_file(dir)));
  }
  const std::string path = dir + "/" + name;
  if (!exists_or_error(path, "the checkpoint that '" + latest_file(dir) + "' names,")) {
    throw Error(fmt::format("'{}' names '{}', which does not exist: the checkpoint was removed "
                            "or moved; point --resume at a checkpoint that exists",
                            latest_file(dir), name));
  }
  return path;
}

} // namespace

std::string checkpoint_file(const std::string& dir, int step) {
  return fmt::format("{}/step-{:06d}.h5", dir, step);
}

std::string latest_file(const std::string& dir) { return dir + "/latest"; }

std::string output_path(const RunConfig& config, const std::string& name) {
  if (name.empty() || name.front() == '/' || config.output.dir.empty()) return name;
  return config.output.dir + "/" + name;
}

// Rank 0: checkpoint.dir holds no checkpoints of another run than the one that starts: a new
// run (`resume` empty), or one resumed from a file outside that directory. Its saves would sit
// among the other run's (that run's later steps kept beside them, `latest` naming either), and
// --resume auto would then go on with whichever run saved last.
void check_no_other_run(const std::string& dir, const std::string& resume) {
  if (dir.empty() || resume == "auto") return;
  std::error_code ec;
  if (!std::filesystem::exists(latest_file(dir), ec)) return;
  if (!resume.empty() &&
      std::filesystem::equivalent(std::filesystem::path(resume).parent_path(), dir, ec)) {
    return; // an earlier checkpoint of the run in checkpoint.dir
  }
  std::ifstream latest(latest_file(dir));
  std::string name;
  std::getline(latest, name);
  throw Error(fmt::format(
      "checkpoint.dir '{}' holds the checkpoints of a run (its latest: '{}'){}; go on with that "
      "run with --resume auto, or give this run a checkpoint.dir of its own (or remove that "
      "run's files)",
      dir, name,
      resume.empty() ? "" : fmt::format(", and --resume names '{}' outside it", resume)));
}

bool missing_on_root(const std::string& path, const parallel::Grid& grid) {
  std::vector<int> missing{0};
  if (grid.rank() == 0 && !path.empty()) {
    std::error_code ec;
    missing[0] = std::filesystem::exists(path, ec) ? 0 : 1;
  }
  parallel::MpiComm(parallel::borrow_comm(grid.comm())).broadcast(Span<int>(missing), 0);
  return missing[0] != 0;
}

RunPlan plan_run(const RunConfig& config, const parallel::Grid& grid) {
  RunPlan plan;
  const ParallelConfig& pc = config.parallel;
  parallel::run_agreed(grid.comm(), [&] {
    plan.reference_dump = !config.output.reference_dump.empty();
    if (plan.reference_dump && grid.size() != 1) {
      throw Error("output.reference_dump is a single-rank testing aid; run it on one rank");
    }
    plan.backend = resolve_backend(pc.backend);
    // A step's micro-batches are the pipeline's: train.grad_accum of them per replica.
    const parallel::Schedule schedule = parallel::make_schedule(
        schedule_kind(pc.schedule), grid.layout().pp, config.train.grad_accum, pc.chunks);
    plan.stage_blocks = parallel::plan_stage_blocks(layers::stage_cost_model(config.model),
                                                    grid.layout().pp * pc.chunks, pc.stage_layout);
    // NCCL carries stage transfers only in per-op groups, which must be proven deadlock-free
    // for the schedule; MPI carries them otherwise.
    const bool nccl_transfers = plan.backend == "nccl" && grid.layout().pp > 1;
    plan.pipeline = parallel::plan_pipeline(schedule, parallel::validation_micro_batches(schedule),
                                            nccl_transfers ? parallel::Transfers::grouped_if_proven
                                                           : parallel::Transfers::up_front);
    // Transfers NCCL cannot group go through MPI, staged where MPI cannot read the buffers.
    plan.transfer_backend =
        plan.pipeline.grouped ? "nccl" : (plan.backend == "nccl" ? mpi_backend() : plan.backend);
    plan.optim = layers::resolve_decay(config.train.optim, config.train.steps);
    plan.metrics_path = output_path(config, config.output.metrics);
    plan.weights_path = output_path(config, config.output.weights);
    plan.trace_path = output_path(config, config.output.trace);
    plan.gradients_path = output_path(config, config.output.gradients);
    if (grid.rank() == 0) {
      make_directory(config.output.dir);
      check_output_file("output.metrics", plan.metrics_path);
      check_output_file("output.weights", plan.weights_path);
      check_output_file("output.trace (--trace)", plan.trace_path);
      check_output_file("output.gradients", plan.gradients_path);
    }
    const CheckpointConfig& k = config.checkpoint;
    if (!k.dir.empty()) {
      plan.checkpoint_dir = output_path(config, k.dir);
      if (grid.rank() == 0) check_checkpoint_dir(plan.checkpoint_dir);
    }
    if (grid.rank() == 0) plan.resume_path = resolve_resume(k.resume, plan.checkpoint_dir);
    if (grid.rank() == 0) check_no_other_run(plan.checkpoint_dir, k.resume);
    plan.init_from = k.init_from;
  });
  parallel::broadcast_text(grid.comm(), plan.resume_path);
  check_memory_fits(config, grid);
  return plan;
}

} // namespace gridlm::engine
