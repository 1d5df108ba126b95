// `gridlm plan`: schedules on paper, before any rank runs them.
#include "app/cmd_plan.hpp"

#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "app/cli_checks.hpp"
#include "app/svg_timeline.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/schedule.hpp"

namespace gridlm::app {
namespace {

struct PlanCommand {
  int pp = 2;                            // pipeline stages
  int micro_batches = 8;                 // micro-batches per step
  int chunks = 1;                        // model chunks per stage (interleaved)
  std::string schedule = "1f1b";         // gpipe, 1f1b, interleaved-1f1b, zb-h1
  std::string svg;                       // timeline picture to write ("" for none)
  std::vector<double> costs{1, 1, 1, 0}; // F, B (input grad), W (weight grad), transfer
};

void run(const PlanCommand& cmd) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  parallel::Schedule s;
  parallel::Timeline tl;
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (cmd.costs.size() != 4) {
      throw Error("--costs takes four numbers: forward, backward, weight-gradient, transfer");
    }
    const parallel::ScheduleKind kind = parallel::parse_schedule(cmd.schedule);
    s = parallel::make_schedule(kind, cmd.pp, cmd.micro_batches, cmd.chunks);
    const std::string problem = parallel::check_schedule(s);
    if (!problem.empty()) throw Error("schedule check failed: " + problem);
    // Without split backward (all kinds but zb-h1) a B costs backward + weight.
    parallel::OpCosts costs{cmd.costs[0], cmd.costs[1], cmd.costs[2], cmd.costs[3]};
    if (s.chunks > 1) {
      costs.forward /= s.chunks;
      costs.backward /= s.chunks;
      costs.weight /= s.chunks;
    }
    tl = parallel::simulate(s, costs);
  });
  if (rank != 0) return;
  std::string out =
      fmt::format("{} schedule: {} stages, {} micro-batches, {} chunk(s) per stage; "
                  "checked: complete, ordered, deadlock-free\n",
                  parallel::schedule_name(s.kind), s.stages, s.micro_batches, s.chunks);
  for (int st = 0; st < s.stages; ++st) {
    out += fmt::format("stage {}:", st);
    for (const parallel::Op& op : s.ops[st])
      out += " " + parallel::op_text(op, s.chunks);
    out += fmt::format("   (peak {} in flight)\n", tl.peak_in_flight[st]);
  }
  out += fmt::format("costs F {} B {} W {} transfer {}: makespan {:.2f}, bubble {:.1f}%\n",
                     cmd.costs[0], cmd.costs[1], cmd.costs[2], cmd.costs[3], tl.makespan,
                     100.0 * tl.bubble);
  std::fputs(out.c_str(), stdout);
  if (!cmd.svg.empty()) {
    std::ofstream f(cmd.svg);
    f << timeline_svg(s, tl);
    if (!f) abort_job(fmt::format("cannot write the timeline picture '{}'", cmd.svg));
    std::printf("timeline: %s\n", cmd.svg.c_str());
  }
}

} // namespace

void add_plan_command(CLI::App& app) {
  auto cmd = std::make_shared<PlanCommand>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Build, check and simulate a pipeline schedule; print it and draw its timeline");
  sub->add_option("--pp", cmd->pp, "Pipeline stages")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("-m,--micro-batches", cmd->micro_batches, "Micro-batches per step")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--chunks", cmd->chunks, "Model chunks per stage (interleaved-1f1b)")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--schedule", cmd->schedule, "gpipe, 1f1b, interleaved-1f1b or zb-h1")
      ->capture_default_str();
  sub->add_option("--svg", cmd->svg, "Write the simulated timeline as an SVG picture");
  sub->add_option("--costs", cmd->costs,
                  "Costs of forward, backward, weight gradient and transfer (a whole stage)")
      ->expected(4)
      ->capture_default_str();
  sub->footer("Example: gridlm plan --pp 4 --micro-batches 8 --schedule zb-h1 --svg zb.svg");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
