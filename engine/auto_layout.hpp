// `auto` layout axes chosen by the layout planner (parallel.profile set): the axes given as
// numbers stay, the schedule, chunks and ZeRO stay, the global batch stays (train.micro_batch x
// train.grad_accum x the dp the fixed rules give); the planner picks the auto axes, the
// micro-batch size and count that split the global batch, and the balanced stage layout, as the
// best predicted tokens/s among the layouts the engine runs and memory holds.
#pragma once

#include <mpi.h>

#include <string>

#include "engine/run_config.hpp"

namespace gridlm::engine {

struct AutoLayout {
  RunConfig config;   // with the choice made (unchanged when nothing was planned)
  std::string report; // what was chosen and why, for rank 0 to print ("" when not planned)
};

// Collective over `world` (with parallel.profile = measure, the profile is measured here).
// Nothing is planned when no layout axis is auto or parallel.profile is "". Throws the same
// CollectiveError on every rank when the profile cannot be read or no layout can run.
AutoLayout plan_auto_layout(const RunConfig& config, MPI_Comm world);

} // namespace gridlm::engine
