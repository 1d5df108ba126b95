// Which transformer blocks each pipeline virtual stage holds (parallel.stage_layout):
//   "uniform"  — equal counts (the blocks must divide into pp x chunks);
//   "balanced" — contiguous counts that minimise the costliest stage under a FLOP estimate
//                that counts the embedding on the first virtual stage and the LM head and loss
//                on the last (a head over a large vocabulary is worth several blocks);
//   "a,b,c,…"  — explicit counts, one per virtual stage q = chunk x pp + stage, in order.
// Every block is assigned exactly once; a layout that drops or repeats one is refused.
// The costs come from the model (layers::stage_cost_model): this file knows blocks, not layers.
#pragma once

#include <string>
#include <vector>

namespace gridlm::parallel {

// The forward cost estimate of the pieces a pipeline distributes (any common unit).
struct StageCostModel {
  int blocks = 1;         // transformer blocks to distribute (model.n_layer)
  double block = 1.0;     // one block
  double embedding = 0.0; // the embedding, on the first virtual stage
  double head = 0.0;      // final norm, LM head and loss, on the last virtual stage
};

// Blocks per virtual stage (Q = pp x chunks of them). Throws gridlm::Error naming
// parallel.stage_layout and the fix for a layout that cannot work.
std::vector<int> plan_stage_blocks(const StageCostModel& m, int Q, const std::string& layout);

// Relative forward cost of each virtual stage under the estimate "balanced" uses.
std::vector<double> stage_costs(const StageCostModel& m, const std::vector<int>& blocks);

// "4,3,3,4": the explicit form of a layout, for the report.
std::string stage_blocks_text(const std::vector<int>& blocks);

} // namespace gridlm::parallel
