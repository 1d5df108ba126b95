// `gridlm plan`: schedules on paper, before any rank runs them; with --auto, the layout planner.
#include "app/cmd_plan.hpp"

#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/cli_checks.hpp"
#include "app/config.hpp"
#include "app/svg_timeline.hpp"
#include "engine/planner.hpp"
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
  bool automatic = false;                // --auto: search layouts instead
  std::string config_path;               // --auto: the run configuration
  std::vector<std::string> sets;         // --auto: its overrides
  std::string profile;                   // --auto: a profile (gridlm profile) or machine file
  int ranks = 0;                         // --auto: ranks of the job (0: this launch's)
  int ranks_per_node = 0;                // --auto: 0: the profile's
  int global_batch = 0;                  // --auto: sequences per step (0: the configuration's)
  int top = 10;                          // --auto: candidates printed
  std::string json;                      // --auto: every ranked candidate as JSON ("": none)
  std::string layout;                    // --auto: only this "DPxPPxTP" ("": every one)
  int max_micro_batch = 0;               // --auto: largest micro-batch size tried (0: any)
  bool recompute = false;                // --auto: price full activation recomputation
};

// "8x4x1" -> dp 8, pp 4, tp 1.
parallel::Layout parse_layout(const std::string& text) {
  parallel::Layout l;
  char x1 = 0, x2 = 0, rest = 0;
  if (std::sscanf(text.c_str(), "%dx%c", &l.dp, &x1) < 1 ||
      std::sscanf(text.c_str(), "%d%c%d%c%d%c", &l.dp, &x1, &l.pp, &x2, &l.tp, &rest) != 5 ||
      x1 != 'x' || x2 != 'x' || l.dp < 1 || l.pp < 1 || l.tp < 1) {
    throw Error(fmt::format("--layout '{}': give DPxPPxTP, e.g. 8x4x1", text));
  }
  return l;
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(1ull << 30)); }

// `word` as a shell reads it back: as it is when it holds nothing the shell treats specially,
// else in single quotes (a configuration path with a space, a --set value with a quote).
std::string shell_word(const std::string& word) {
  const bool plain =
      !word.empty() &&
      word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijk"
                             "lmnopqrstuvwxyz0123456789_./=,:+-@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (const char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string plan_report(const PlanCommand& cmd, const engine::RunConfig& config,
                        const engine::Profile& machine, const engine::PlanResult& r) {
  std::string out = fmt::format(
      "layouts of {} ranks ({} per node) for a global batch of {} sequences of {} tokens, priced "
      "by {} '{}' ({}{})\n",
      cmd.ranks, r.ranks_per_node, r.global_batch, config.model.seq_len,
      machine.source == "machine" ? "machine file" : "profile", cmd.profile, machine.name,
      machine.source == "machine" ? "" : fmt::format(", measured with {} ranks", machine.ranks));
  out += fmt::format(" #  {:<22} {:<27} {:>11} {:>4} {:>9} {:>10} {:>7} {:>11}\n", "layout",
                     "schedule", "b x m", "zero", "step ms", "tokens/s", "bubble", "memory/rank");
  for (std::size_t i = 0; i < r.ranked.size() && int(i) < cmd.top; ++i) {
    const engine::Candidate& c = r.ranked[i].candidate;
    const engine::Prediction& p = r.ranked[i].prediction;
    const std::string sched =
        c.chunks > 1 ? fmt::format("{} x{} chunks", c.schedule, c.chunks) : c.schedule;
    out += fmt::format(
        "{:>2}  {:<22} {:<27} {:>11} {:>4} {:>9.1f} {:>10.0f} {:>6.1f}% {:>11}\n", i + 1,
        c.layout.str(), sched, fmt::format("{} x {}", c.micro_batch, c.micro_batches), c.zero,
        1e3 * p.step_seconds, p.tokens_per_second, 100 * p.bubble, gib(p.memory_per_rank));
  }
  if (r.ranked.empty()) {
    out += "no layout can run; the reasons are below\n";
  } else {
    const engine::Ranked& best = r.ranked.front();
    // The plan's own overrides too, before the layout's (which win where both set a key).
    std::string sets;
    for (const std::string& s : cmd.sets)
      sets += " --set " + shell_word(s);
    out += fmt::format("best: {}gridlm train{}{} {}\n",
                       cmd.recompute ? "(priced with recomputation) " : "",
                       cmd.config_path.empty() ? "" : " --config " + shell_word(cmd.config_path),
                       sets, best.candidate.flags());
    out += fmt::format("  step {:.1f} ms = pipeline {:.1f} (bubble {:.1f}%) + exposed dp "
                       "reduction {:.1f} + optimizer {:.1f} + the rest\n",
                       1e3 * best.prediction.step_seconds, 1e3 * best.prediction.pipeline_seconds,
                       100 * best.prediction.bubble, 1e3 * best.prediction.dp_exposed_seconds,
                       1e3 * best.prediction.optimizer_seconds);
  }
  if (!r.caveat.empty()) out += "note: " + r.caveat + "\n";
  const int refused = r.considered - int(r.ranked.size());
  out += fmt::format("{} candidates considered, {} can run, {} refused", r.considered,
                     r.ranked.size(), refused);
  out += refused > 0 ? ":\n" : "\n";
  for (const engine::Refusal& f : r.refused)
    out += fmt::format("  {:>4} x {} (e.g. {})\n", f.count, f.reason, f.example.str());
  return out;
}

std::string plan_json(const engine::PlanResult& r) {
  nlohmann::json all = nlohmann::json::array();
  for (const engine::Ranked& x : r.ranked) {
    const engine::Candidate& c = x.candidate;
    all.push_back({{"dp", c.layout.dp},
                   {"pp", c.layout.pp},
                   {"tp", c.layout.tp},
                   {"schedule", c.schedule},
                   {"chunks", c.chunks},
                   {"micro_batch", c.micro_batch},
                   {"micro_batches", c.micro_batches},
                   {"zero", c.zero},
                   {"stage_layout", parallel::stage_blocks_text(c.stage_blocks)},
                   {"flags", c.flags()},
                   {"step_s", x.prediction.step_seconds},
                   {"tokens_per_s", x.prediction.tokens_per_second},
                   {"bubble", x.prediction.bubble},
                   {"memory_per_rank_bytes", x.prediction.memory_per_rank}});
  }
  return nlohmann::json{{"global_batch", r.global_batch}, {"ranked", all}}.dump(1) + "\n";
}

void run_auto(PlanCommand cmd) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (cmd.ranks == 0) cmd.ranks = size;
  std::string report;
  parallel::run_agreed(MPI_COMM_WORLD, [&] {
    if (cmd.profile.empty()) {
      throw Error("gridlm plan --auto needs --profile FILE (from gridlm profile) or --machine "
                  "FILE (a machine file, docs/formats/profile.md)");
    }
    const engine::RunConfig config = read_run_config(cmd.config_path, cmd.sets);
    const engine::Profile machine = engine::read_profile(cmd.profile);
    engine::PlanRequest req = engine::make_request(cmd.ranks, cmd.ranks_per_node, cmd.global_batch);
    req.pricing.recompute = cmd.recompute;
    req.max_micro_batch = cmd.max_micro_batch;
    if (!cmd.layout.empty()) {
      req.layout = parse_layout(cmd.layout);
      if (req.layout->size() != cmd.ranks) {
        throw Error(fmt::format("--layout {} has {} ranks, not the {} of --ranks (or of this "
                                "launch): give a layout of {} ranks, or --ranks {}",
                                cmd.layout, req.layout->size(), cmd.ranks, cmd.ranks,
                                req.layout->size()));
      }
    }
    const engine::PlanResult r = engine::plan_layouts(config, req, machine);
    report = plan_report(cmd, config, machine, r);
    if (rank == 0 && !cmd.json.empty()) {
      std::ofstream f(cmd.json);
      f << plan_json(r);
      if (!f) throw Error(fmt::format("cannot write '{}'; give a writable path", cmd.json));
    }
    // Nothing to run is a failed plan (a job script must not go on to train), reasons first.
    if (r.ranked.empty()) {
      if (rank == 0) {
        std::fputs(report.c_str(), stdout);
        std::fflush(stdout);
      }
      throw Error(fmt::format(
          "no layout of {} ranks can run this configuration (the reasons are above): give "
          "another --ranks, --ranks-per-node, --global-batch or --max-micro-batch, or a smaller "
          "model",
          cmd.ranks));
    }
  });
  if (rank == 0) std::fputs(report.c_str(), stdout);
}

void run(const PlanCommand& cmd) {
  if (cmd.automatic) {
    run_auto(cmd);
    return;
  }
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
      ->capture_default_str()
      ->check(non_negative_number());
  sub->add_flag("--auto", cmd->automatic,
                "Search every layout of --ranks ranks for --config and rank them by predicted "
                "tokens/s (needs --profile or --machine)");
  sub->add_option("-c,--config", cmd->config_path, "--auto: the run configuration (TOML)")
      ->check(CLI::ExistingFile);
  sub->add_option("--set", cmd->sets, "--auto: override one key: section.key=value")->take_all();
  sub->add_option("--profile,--machine", cmd->profile,
                  "--auto: a profile written by gridlm profile, or a machine file");
  sub->add_option("--ranks", cmd->ranks, "--auto: ranks of the job (default: this launch's)")
      ->check(positive_number());
  sub->add_option("--ranks-per-node", cmd->ranks_per_node,
                  "--auto: ranks (devices) per node (default: the profile's; nodes of another "
                  "size are assumed to give each rank's threads a core each)")
      ->check(positive_number());
  sub->add_option("--global-batch", cmd->global_batch,
                  "--auto: sequences per optimizer step (default: micro_batch x grad_accum x dp "
                  "of the configuration)")
      ->check(positive_number());
  sub->add_option("--top", cmd->top, "--auto: candidates printed")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--json", cmd->json, "--auto: write every candidate that can run, ranked, here");
  sub->add_option("--layout", cmd->layout, "--auto: only this layout, DPxPPxTP (e.g. 8x4x1)");
  sub->add_option("--max-micro-batch", cmd->max_micro_batch,
                  "--auto: the largest micro-batch size tried (default: any)")
      ->check(positive_number());
  sub->add_flag("--recompute", cmd->recompute,
                "--auto: price full activation recomputation (as Megatron's published runs; "
                "gridlm does not recompute): to compare with runs that do");
  sub->footer("Example: gridlm plan --pp 4 --micro-batches 8 --schedule zb-h1 --svg zb.svg\n"
              "         gridlm plan --auto --ranks 8 --config run.toml --profile here.json");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
