// The planner's choice of the auto layout axes at the start of `gridlm train`.
#include "engine/auto_layout.hpp"

#include <fmt/format.h>

#include "engine/planner.hpp"
#include "engine/profiler.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/layout.hpp"

namespace gridlm::engine {
namespace {

// The fewest ranks any node of the job holds (what bounds a tensor group).
int smallest_node(MPI_Comm world) {
  int size = parallel::comm_size(*parallel::split_nodes(world));
  parallel::MpiComm(parallel::borrow_comm(world), "plan")
      .all_reduce(Span<int>(&size, 1), parallel::ReduceOp::min);
  return size;
}

// What `parallel.profile = measure` times: every tp the configuration allows here, and
// micro-batches of 1, 2, 4, ... up to the configured size (the planner interpolates between).
ProfileRequest start_up_request(const RunConfig& config, int ranks, int node) {
  ProfileRequest req;
  req.model = config.model;
  req.precision = config.train.precision;
  req.repeats = 3;
  req.tp.clear();
  const int tp = parallel::parse_axis("parallel.tp", config.parallel.tp); // 0: auto
  for (int t = 1; t <= node; ++t) {
    const bool allowed = tp == 0 || tp == t;
    if (allowed && node % t == 0 && ranks % t == 0 && config.model.n_head % t == 0) {
      req.tp.push_back(t);
    }
  }
  if (req.tp.empty()) req.tp.push_back(1);
  // Not above the configured size: the memory a run was sized for.
  req.micro_batches.clear();
  for (int b = 1; b < config.train.micro_batch; b *= 2)
    req.micro_batches.push_back(b);
  req.micro_batches.push_back(config.train.micro_batch);
  return req;
}

// Whether a candidate keeps what the configuration fixed.
bool keeps(const RunConfig& config, const Candidate& c) {
  const ParallelConfig& pc = config.parallel;
  // As the grid reads them: "02" is 2.
  auto axis = [](const char* name, const std::string& text, int value) {
    const int fixed = parallel::parse_axis(name, text); // 0: auto
    return fixed == 0 || fixed == value;
  };
  // One stage runs every schedule alike, so the planner prices only 1f1b there.
  return axis("parallel.dp", pc.dp, c.layout.dp) && axis("parallel.pp", pc.pp, c.layout.pp) &&
         axis("parallel.tp", pc.tp, c.layout.tp) &&
         (c.schedule == pc.schedule || c.layout.pp == 1) && c.chunks == pc.chunks &&
         (c.zero == pc.zero || c.layout.dp == 1);
}

} // namespace

AutoLayout plan_auto_layout(const RunConfig& config, MPI_Comm world) {
  AutoLayout out{config, ""};
  const ParallelConfig& pc = config.parallel;
  if (pc.profile.empty() || (pc.dp != "auto" && pc.pp != "auto" && pc.tp != "auto")) return out;
  const int ranks = parallel::comm_size(world);
  const int node = smallest_node(world);
  Profile profile;
  if (pc.profile == "measure") {
    profile = measure_profile(start_up_request(config, ranks, node), world);
  } else {
    parallel::run_agreed(world, [&] { profile = read_profile(pc.profile); });
  }
  parallel::run_agreed(world, [&] {
    const int global = configured_global_batch(config, ranks, node);
    const PlanResult r = plan_layouts(config, make_request(ranks, node, global), profile);
    int runnable = 0;
    const Ranked* best = nullptr;
    for (const Ranked& x : r.ranked) {
      if (!keeps(config, x.candidate)) continue;
      // At one stage the planner prices 1f1b; the configured schedule may hold more (zb-h1's
      // split backward keeps more gradients per micro-batch), and must fit too.
      if (x.candidate.layout.pp == 1 && x.candidate.schedule != pc.schedule) {
        Candidate as_run = x.candidate;
        as_run.schedule = pc.schedule;
        if (!candidate_problem(config, as_run, profile).empty()) continue;
      }
      ++runnable;
      if (best == nullptr) best = &x;
    }
    if (best == nullptr) {
      std::string why;
      for (std::size_t i = 0; i < r.refused.size() && i < 3; ++i)
        why += fmt::format("; {} x {}", r.refused[i].count, r.refused[i].reason);
      throw Error(fmt::format("parallel.profile: no layout of {} ranks with parallel.dp = {}, "
                              "pp = {}, tp = {}, schedule {} and {} chunk(s) can run a global "
                              "batch of {} sequences{}; give the layout as numbers, or see "
                              "gridlm plan --auto",
                              ranks, pc.dp, pc.pp, pc.tp, pc.schedule, pc.chunks, global, why));
    }
    const Candidate& c = best->candidate;
    out.config = with_candidate(config, c);
    out.config.parallel.zero = pc.zero;
    out.config.parallel.schedule = pc.schedule;
    out.report = fmt::format(
        "layout planner (parallel.profile = {}): {}, {} micro-batch(es) of {} per replica "
        "(global batch {}), stage layout {}: predicted {:.1f} ms per step, {:.0f} tokens/s, "
        "the best of {} layouts that keep the configured axes and schedule",
        pc.profile, c.layout.str(), c.micro_batches, c.micro_batch, global,
        out.config.parallel.stage_layout, 1e3 * best->prediction.step_seconds,
        best->prediction.tokens_per_second, runnable);
    if (!r.caveat.empty()) out.report += "; note: " + r.caveat;
  });
  return out;
}

} // namespace gridlm::engine
