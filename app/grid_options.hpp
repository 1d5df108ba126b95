// Command-line options that describe the process grid, shared by every subcommand that builds
// one (grid now; train later).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "parallel/grid.hpp"

namespace gridlm::app {

struct GridFlags {
  std::string dp = "auto";            // data-parallel replicas, or auto
  std::string pp = "1";               // pipeline stages, or auto
  std::string tp = "1";               // tensor-parallel ranks per stage, or auto
  bool force_tp_across_nodes = false; // allow a tensor group to span nodes
  int simulate_ranks_per_node = 0;    // testing aid: pretend nodes of this many ranks
};

void add_grid_flags(CLI::App& cmd, GridFlags& flags);

// Parses the axis values; throws gridlm::Error naming the flag on bad input.
parallel::GridOptions to_grid_options(const GridFlags& flags);

} // namespace gridlm::app
