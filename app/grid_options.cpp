// Grid flags on the command line.
#include "app/grid_options.hpp"

#include "app/cli_checks.hpp"

namespace gridlm::app {

void add_grid_flags(CLI::App& cmd, GridFlags& flags) {
  cmd.add_option("--dp", flags.dp, "Data-parallel replicas: a number or 'auto' (what is left)")
      ->capture_default_str();
  cmd.add_option("--pp", flags.pp, "Pipeline stages: a number or 'auto'")->capture_default_str();
  cmd.add_option("--tp", flags.tp,
                 "Tensor-parallel ranks per stage: a number or 'auto' (fill a node)")
      ->capture_default_str();
  cmd.add_flag("--force-tp-across-nodes", flags.force_tp_across_nodes,
               "Allow a tensor-parallel group to span nodes (slow; refused by default)");
  cmd.add_option("--simulate-ranks-per-node", flags.simulate_ranks_per_node,
                 "Testing aid: treat every N consecutive ranks as one node")
      ->check(non_negative_number())
      ->group("Testing");
}

parallel::GridOptions to_grid_options(const GridFlags& flags) {
  parallel::GridOptions options;
  options.layout.dp = parallel::parse_axis("--dp", flags.dp);
  options.layout.pp = parallel::parse_axis("--pp", flags.pp);
  options.layout.tp = parallel::parse_axis("--tp", flags.tp);
  options.allow_tp_across_nodes = flags.force_tp_across_nodes;
  options.simulate_ranks_per_node = flags.simulate_ranks_per_node;
  return options;
}

} // namespace gridlm::app
