// `gridlm train` and `gridlm config`.
#include "app/cmd_train.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "app/config.hpp"
#include "app/exit_status.hpp"
#include "app/slurm.hpp"
#include "engine/auto_layout.hpp"
#include "engine/job_signals.hpp"
#include "engine/trainer.hpp"
#include "layers/kokkos_runtime.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/grid.hpp"
#include "parallel/wait_policy.hpp"
#include "parallel/watchdog.hpp"

namespace gridlm::app {
namespace {

struct TrainCommand {
  std::string config_path;       // TOML file; defaults when empty
  std::vector<std::string> sets; // section.key=value overrides, applied in order
  std::string trace;             // Chrome-trace file (output.trace, but relative to here)
  std::string resume;            // checkpoint.resume: a checkpoint (relative to here) or auto
  std::string init_from;         // checkpoint.init_from, relative to here
  bool dry_run = false;          // check everything a run needs, then exit without training
};

void run(const TrainCommand& cmd) {
  // First: a signal during the start-up (its data check can be long) or the dry run is then
  // kept (SIGUSR1: MPICH's handler swallowed it) or harmless (SIGUSR2, SIGTERM: they killed it).
  engine::install_job_signals();
  RunConfig config;
  parallel::GridOptions grid_options;
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (!cmd.config_path.empty()) load_config_file(config, cmd.config_path);
    for (const std::string& s : cmd.sets)
      apply_override(config, s);
    if (!cmd.trace.empty()) config.output.trace = std::filesystem::absolute(cmd.trace).string();
    if (!cmd.resume.empty()) {
      config.checkpoint.resume =
          cmd.resume == "auto" ? cmd.resume : std::filesystem::absolute(cmd.resume).string();
    }
    if (!cmd.init_from.empty()) {
      config.checkpoint.init_from = std::filesystem::absolute(cmd.init_from).string();
    }
    config.output.dir = expand_job_id(config.output.dir);
    config.checkpoint.dir = expand_job_id(config.checkpoint.dir);
    validate(config);
  });
  parallel::set_job_wait_policy(config.parallel.wait, MPI_COMM_WORLD,
                                layers::compute_threads_per_rank());
  const engine::AutoLayout planned = engine::plan_auto_layout(config, MPI_COMM_WORLD);
  config = planned.config;
  if (!planned.report.empty() && parallel::comm_rank(MPI_COMM_WORLD) == 0) {
    std::printf("%s\n", planned.report.c_str());
  }
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    // The planner's layout is checked as a configuration written so would be (it knows the
    // engine's refusals, not every one of validate()'s).
    if (!planned.report.empty()) validate(config);
    grid_options.layout.dp = parallel::parse_axis("parallel.dp", config.parallel.dp);
    grid_options.layout.pp = parallel::parse_axis("parallel.pp", config.parallel.pp);
    grid_options.layout.tp = parallel::parse_axis("parallel.tp", config.parallel.tp);
    grid_options.layout.heads = config.model.n_head; // tp = auto: a tp the model can split
    grid_options.allow_tp_across_nodes = config.parallel.force_tp_across_nodes;
  });
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, grid_options);
  if (const auto slurm = read_slurm_environment(); slurm && grid.rank() == 0) {
    std::printf("%s\n", describe_slurm(*slurm, grid.size()).c_str());
  }
  if (cmd.dry_run) {
    engine::check_run(config, grid);
    if (const int signal = engine::job_stop_signal(); signal != 0 && grid.rank() == 0) {
      std::printf("note: %s arrived during the dry run, which only checks: the run itself was "
                  "not started, so nothing is stopped\n",
                  engine::signal_name(signal));
    }
    return;
  }
  const engine::TrainResult r = engine::train(config, grid, config_as_toml(config));
  if (!r.stopped.empty()) {
    // Every rank sets the status, so that srun and mpiexec report it whichever rank they read.
    exit_status() = r.checkpoint.empty() ? 1 : exit_checkpointed;
    if (grid.rank() == 0 && r.checkpoint.empty()) {
      std::fprintf(stderr,
                   "gridlm: stopped after step %d of %d (%s) without a checkpoint: "
                   "checkpoint.dir is not set, so there is nothing to go on from (the weights "
                   "of this step are in output.weights)\n",
                   r.steps_done, config.train.steps, r.stopped.c_str());
    } else if (grid.rank() == 0) {
      std::printf("stopped after step %d of %d (%s): checkpoint %s; run the same command with "
                  "--resume auto to go on (exit status %d)\n",
                  r.steps_done, config.train.steps, r.stopped.c_str(), r.checkpoint.c_str(),
                  exit_checkpointed);
    }
    return;
  }
  if (grid.rank() == 0 && r.losses.empty()) {
    std::printf("done: the run had already reached step %d of %d\n", r.steps_done,
                config.train.steps);
  } else if (grid.rank() == 0) {
    std::printf("done: loss %.4f -> %.4f, %.0f tokens/s (median)\n", r.first_loss, r.last_loss,
                r.tokens_per_s);
  }
}

} // namespace

void add_train_command(CLI::App& app) {
  auto cmd = std::make_shared<TrainCommand>();
  CLI::App* sub = app.add_subcommand("train", "Train the GPT model over the grid of ranks");
  sub->add_option("-c,--config", cmd->config_path, "TOML run configuration (docs/config.md)")
      ->check(CLI::ExistingFile);
  sub->add_option("--set", cmd->sets, "Override one key: section.key=value (repeatable)")
      ->take_all();
  sub->add_option("--trace", cmd->trace,
                  "Write a Chrome-trace JSON of the first output.trace_steps steps (one track "
                  "per rank; open in ui.perfetto.dev)");
  sub->add_option("--resume", cmd->resume,
                  "Go on with a run from a checkpoint: its path, or auto (the newest complete one "
                  "in checkpoint.dir, or a fresh start when there is none)");
  sub->add_option("--init-from", cmd->init_from,
                  "Start a new run (step 0, fresh optimizer) from the weights of a checkpoint or "
                  "weights file");
  sub->add_flag("--dry-run", cmd->dry_run,
                "Check the configuration, the layout against the allocation, the data file, the "
                "checkpoint directory and the checkpoint to resume from, and the memory per rank; "
                "exit without training (status 0 when a run would start)");
  sub->footer("Example: mpiexec -n 4 gridlm train --config run.toml --set train.lr=3e-4\n"
              "'gridlm config' prints every key with its default.");
  sub->callback([cmd] { run(*cmd); });
}

void add_config_command(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("config", "Print every configuration key with its default");
  sub->add_flag("--markdown", *markdown, "As the Markdown table of docs/config.md");
  sub->callback([markdown] {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
      std::fputs((*markdown ? defaults_as_markdown() : defaults_as_toml()).c_str(), stdout);
    }
  });
}

} // namespace gridlm::app
