// `gridlm grid`: every rank builds the grid; rank 0 prints one row per rank, the Slurm
// allocation and any warning, as text or JSON.
#include "app/cmd_grid.hpp"

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/grid_options.hpp"
#include "app/slurm.hpp"
#include "parallel/agree.hpp"
#include "parallel/grid.hpp"

namespace gridlm::app {
namespace {

struct GridCommand {
  GridFlags flags;
  bool json = false; // print JSON instead of a table
};

std::string as_text(const parallel::Grid& grid, const std::vector<parallel::RankInfo>& table,
                    const std::optional<SlurmInfo>& slurm) {
  std::string out = fmt::format("grid: {} ranks = {} on {} node{} ({} ranks per node at least)\n",
                                grid.size(), grid.layout().str(), grid.num_nodes(),
                                grid.num_nodes() == 1 ? "" : "s", grid.min_ranks_per_node());
  out +=
      fmt::format("{:>6} {:>4} {:>4} {:>4} {:>5}  {}\n", "rank", "dp", "pp", "tp", "node", "host");
  for (const parallel::RankInfo& r : table) {
    out += fmt::format("{:>6} {:>4} {:>4} {:>4} {:>5}  {}\n", r.rank, r.coords.dp, r.coords.pp,
                       r.coords.tp, r.node, r.host);
  }
  if (slurm) out += describe_slurm(*slurm, grid.size()) + "\n";
  if (grid.tp_crosses_nodes()) {
    out += "warning: tensor-parallel groups span nodes (--force-tp-across-nodes); every layer "
           "will wait on the inter-node network\n";
  }
  return out;
}

std::string as_json(const parallel::Grid& grid, const std::vector<parallel::RankInfo>& table,
                    const std::optional<SlurmInfo>& slurm) {
  nlohmann::json j;
  j["world_size"] = grid.size();
  j["layout"] = {{"dp", grid.layout().dp}, {"pp", grid.layout().pp}, {"tp", grid.layout().tp}};
  j["nodes"] = grid.num_nodes();
  j["tp_crosses_nodes"] = grid.tp_crosses_nodes();
  j["ranks"] = nlohmann::json::array();
  for (const parallel::RankInfo& r : table) {
    j["ranks"].push_back({{"rank", r.rank},
                          {"dp", r.coords.dp},
                          {"pp", r.coords.pp},
                          {"tp", r.coords.tp},
                          {"node", r.node},
                          {"host", r.host}});
  }
  if (slurm) {
    j["slurm"] = {{"job_id", slurm->job_id},
                  {"nodes", slurm->nodes},
                  {"tasks", slurm->tasks},
                  {"tasks_per_node", slurm->tasks_per_node},
                  {"node_list", slurm->node_list}};
  }
  return j.dump(2) + "\n";
}

void run(const GridCommand& cmd) {
  parallel::GridOptions options;
  parallel::run_agreed(MPI_COMM_WORLD, [&] { options = to_grid_options(cmd.flags); });
  const parallel::Grid grid = parallel::Grid::create(MPI_COMM_WORLD, options);
  const std::vector<parallel::RankInfo> table = grid.gather_table();
  if (grid.rank() == 0) {
    const auto slurm = read_slurm_environment();
    const std::string out = cmd.json ? as_json(grid, table, slurm) : as_text(grid, table, slurm);
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
}

} // namespace

void add_grid_command(CLI::App& app) {
  auto cmd = std::make_shared<GridCommand>();
  CLI::App* sub = app.add_subcommand(
      "grid", "Lay the ranks out on a dp x pp x tp grid, as training would, and print it");
  add_grid_flags(*sub, cmd->flags);
  sub->add_flag("--json", cmd->json, "Print the grid as JSON");
  sub->footer("Example: mpiexec -n 8 gridlm grid --dp auto --pp 2 --tp 2");
  sub->callback([cmd] { run(*cmd); });
}

} // namespace gridlm::app
