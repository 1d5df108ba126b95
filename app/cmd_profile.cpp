// `gridlm profile`: measures what the layout planner needs on the ranks it is launched on and
// writes it as a profile file (docs/formats/profile.md).
#include "app/cmd_profile.hpp"

#include <mpi.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "app/cli_checks.hpp"
#include "app/config.hpp"
#include "engine/profiler.hpp"
#include "layers/kokkos_runtime.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::app {
namespace {

struct ProfileCommand {
  std::string config_path;                    // TOML file whose [model] is measured
  std::vector<std::string> sets;              // section.key=value overrides
  std::string output = "profile.json";        // the profile file written
  std::vector<int> tp{1};                     // tensor-parallel degrees
  std::vector<int> micro_batches{1, 2, 4, 8}; // micro-batch sizes
  int repeats = 5;                            // timed repetitions of each op
  int passes = 3;                             // passes over every op (each keeps its median)
};

void run(const ProfileCommand& cmd) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  engine::ProfileRequest req;
  std::string wait;
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    const engine::RunConfig config = read_run_config(cmd.config_path, cmd.sets);
    wait = config.parallel.wait;
    req.model = config.model;
    req.precision = config.train.precision;
    // Before minutes of measuring: the file can be written.
    if (rank == 0) {
      if (const std::string why = cannot_create_partial(cmd.output); !why.empty()) {
        throw Error(fmt::format("cannot write the profile '{}.partial': {}; give a writable path",
                                cmd.output, why));
      }
    }
  });
  // Ops are timed waiting as the runs they price will wait.
  parallel::set_job_wait_policy(wait, MPI_COMM_WORLD, layers::compute_threads_per_rank());
  req.tp = cmd.tp;
  req.micro_batches = cmd.micro_batches;
  req.repeats = cmd.repeats;
  req.passes = cmd.passes;
  const double t0 = MPI_Wtime();
  const engine::Profile p = engine::measure_profile(req, MPI_COMM_WORLD);
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (rank == 0) engine::write_profile(cmd.output, p);
  });
  if (rank != 0) return;
  std::string out = fmt::format("profile of {} rank(s) on {} ({} per node), {:.1f} s: {}\n",
                                p.ranks, p.name, p.ranks_per_node, MPI_Wtime() - t0, cmd.output);
  out += "  tp  micro-batch  block F / B / Bin / W ms        embedding F ms  head F / B ms\n";
  for (const engine::OpEntry& e : p.ops) {
    out += fmt::format("  {:<3} {:<12} {:6.2f} {:6.2f} {:6.2f} {:6.2f}    {:8.3f}        {:6.2f} "
                       "{:6.2f}\n",
                       e.tp, e.micro_batch, 1e3 * e.block.forward, 1e3 * e.block.backward,
                       1e3 * e.block.backward_input, 1e3 * e.block.backward_weight,
                       1e3 * e.embedding.forward, 1e3 * e.head.forward, 1e3 * e.head.backward);
  }
  out += fmt::format("  AdamW {:.2f} ns per parameter\n", 1e9 * p.optimizer_per_param);
  out += fmt::format("  timed with {} compute thread(s) per rank on {:g} core(s) per node: {:.2f} "
                     "of a core each\n",
                     p.threads_per_rank, p.cores_per_node, p.core_share);
  if (p.ranks_per_node > 1) {
    out += fmt::format("  inside a node: all-reduce {:.1f} us + {:.2f} GB/s, send {:.1f} us + "
                       "{:.2f} GB/s\n",
                       1e6 * p.intra.all_reduce.latency, p.intra.all_reduce.bandwidth / 1e9,
                       1e6 * p.intra.send_recv.latency, p.intra.send_recv.bandwidth / 1e9);
  }
  if (p.inter) {
    out += fmt::format("  across nodes: all-reduce {:.1f} us + {:.2f} GB/s, send {:.1f} us + "
                       "{:.2f} GB/s\n",
                       1e6 * p.inter->all_reduce.latency, p.inter->all_reduce.bandwidth / 1e9,
                       1e6 * p.inter->send_recv.latency, p.inter->send_recv.bandwidth / 1e9);
  }
  std::fputs(out.c_str(), stdout);
}

} // namespace

void add_profile_command(CLI::App& app) {
  auto cmd = std::make_shared<ProfileCommand>();
  CLI::App* sub = app.add_subcommand(
      "profile", "Measure op, optimizer and communication costs here for the layout planner");
  sub->add_option("-c,--config", cmd->config_path, "TOML run configuration whose model is measured")
      ->check(CLI::ExistingFile);
  sub->add_option("--set", cmd->sets, "Override one key: section.key=value (repeatable)")
      ->take_all();
  sub->add_option("-o,--output", cmd->output, "The profile file to write")->capture_default_str();
  sub->add_option("--tp", cmd->tp, "Tensor-parallel degrees to measure (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--micro-batches", cmd->micro_batches,
                  "Micro-batch sizes (sequences) to measure (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--repeats", cmd->repeats, "Timed repetitions of each op (the median is kept)")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--passes", cmd->passes,
                  "Passes over every op, one after another; each op keeps its median pass (a "
                  "burst of the machine's noise spoils one pass, not the profile)")
      ->capture_default_str()
      ->check(positive_number());
  sub->footer("Example: mpiexec -n 4 gridlm profile --config run.toml --tp 1,2,4 -o here.json\n"
              "then: gridlm plan --auto --ranks 4 --config run.toml --profile here.json");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
