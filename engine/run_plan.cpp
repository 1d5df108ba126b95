// The run's decisions, each taken once.
#include "engine/run_plan.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "engine/comm_backend.hpp"
#include "layers/model_config.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/stage_layout.hpp"

namespace gridlm::engine {
namespace {

void make_directory(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
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

} // namespace

std::string output_path(const RunConfig& config, const std::string& name) {
  if (name.empty() || name.front() == '/' || config.output.dir.empty()) return name;
  return config.output.dir + "/" + name;
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
    plan.pipeline = parallel::plan_pipeline(schedule, config.train.eval_batches,
                                            nccl_transfers ? parallel::Transfers::grouped_if_proven
                                                           : parallel::Transfers::up_front);
    plan.transfer_backend = plan.pipeline.grouped ? "nccl" : "mpi";
    plan.optim = layers::resolve_decay(config.train.optim, config.train.steps);
    plan.metrics_path = output_path(config, config.output.metrics);
    plan.weights_path = output_path(config, config.output.weights);
    plan.trace_path = output_path(config, config.output.trace);
    if (grid.rank() == 0) make_directory(config.output.dir);
  });
  return plan;
}

} // namespace gridlm::engine
