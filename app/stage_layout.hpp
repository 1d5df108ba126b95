// Which transformer blocks each pipeline virtual stage holds (parallel.stage_layout):
//   "uniform"  — equal counts (the blocks must divide into pp x chunks);
//   "balanced" — contiguous counts that minimise the costliest stage under a FLOP estimate
//                that counts the embedding on the first virtual stage and the LM head and loss
//                on the last (a head over a large vocabulary is worth several blocks);
//   "a,b,c,…"  — explicit counts, one per virtual stage q = chunk x pp + stage, in order.
// Every block is assigned exactly once; a layout that drops or repeats one is refused.
#pragma once

#include <string>
#include <vector>

#include "layers/model_config.hpp"

namespace gridlm::app {

// Blocks per virtual stage (Q = pp x chunks of them). Throws gridlm::Error naming
// parallel.stage_layout and the fix for a layout that cannot work.
std::vector<int> plan_stage_blocks(const layers::ModelConfig& m, int Q, const std::string& layout);

// Relative forward cost of each virtual stage under the estimate "balanced" uses.
std::vector<double> stage_costs(const layers::ModelConfig& m, const std::vector<int>& blocks);

// "4,3,3,4": the explicit form of a layout, for the report.
std::string stage_blocks_text(const std::vector<int>& blocks);

} // namespace gridlm::app
