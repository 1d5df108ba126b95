// Pipeline plans: the checks and the simulation a run needs, each done once.
#include "parallel/pipeline_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"
#include "parallel/schedule_transfers.hpp"

namespace gridlm::parallel {

int validation_micro_batches(const Schedule& train) {
  const int cap = std::max(4, train.stages * train.chunks);
  int best = 1;
  for (int d = 1; d <= std::min(cap, train.micro_batches); ++d) {
    if (train.micro_batches % d == 0) best = d;
  }
  return best;
}

PipelinePlan plan_pipeline(const Schedule& train, int eval_micro_batches, Transfers transfers) {
  if (train.micro_batches > max_micro_batches || eval_micro_batches > max_micro_batches) {
    throw Error(fmt::format("at most {} micro-batches per step (train.grad_accum {}, "
                            "validation {})",
                            max_micro_batches, train.micro_batches, eval_micro_batches));
  }
  PipelinePlan plan;
  plan.train = train;
  plan.eval = make_schedule(ScheduleKind::forward_only, train.stages,
                            std::max(1, eval_micro_batches), train.chunks);
  if (transfers != Transfers::up_front) {
    const std::string problem =
        check_grouped_transfers(plan.train) + check_grouped_transfers(plan.eval);
    if (problem.empty()) {
      plan.grouped = true;
    } else if (transfers == Transfers::grouped) {
      throw Error(fmt::format("schedule {} cannot run its stage transfers in NCCL groups ({}); "
                              "use another schedule or MPI stage transfers",
                              schedule_name(train.kind), problem));
    } else {
      plan.transfers_note = problem;
    }
  }
  plan.boundary_buffers = std::max(held_boundary_buffers(plan.train, plan.grouped),
                                   held_boundary_buffers(plan.eval, plan.grouped));
  plan.split_backward = train.kind == ScheduleKind::zb_h1;
  // F, B and W of one unit each: a fused B costs 2, and zb-h1's W fills its bubble as it does
  // in gridlm plan and docs/performance.md's formula column. Slots depend on the ops' order alone.
  plan.uniform = simulate(plan.train, OpCosts{1.0, 1.0, 1.0, 0.0});
  // Per chunk: each chunk of a stage has its own slots (interleaved-1f1b held v times too many
  // when they were the stage's whole peak).
  for (int s = 0; s < train.stages; ++s)
    plan.slots.push_back(std::max(1, plan.uniform.peak_per_chunk[std::size_t(s)]));
  return plan;
}

} // namespace gridlm::parallel
