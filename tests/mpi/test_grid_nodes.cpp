// The node check of parallel::Grid with simulated nodes (consecutive ranks grouped by
// --simulate-ranks-per-node): a tensor group that spans nodes is refused on every rank with a
// suggestion, unless forced. Needs two nodes, so runs at 2, 4 and 8 ranks.
#include <gtest/gtest.h>

#include <mpi.h>

#include "parallel/diagnostics.hpp"
#include "parallel/grid.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;
using namespace gridlm::parallel;

using test::grid_error;
using test::world_rank;
using test::world_size;

TEST(Grid, SimulatedNodesAreCountedAndIndexed) {
  const int n = world_size();
  GridOptions o;
  o.simulate_ranks_per_node = 2;
  const Grid g = Grid::create(MPI_COMM_WORLD, o);
  EXPECT_EQ(g.num_nodes(), (n + 1) / 2);
  EXPECT_EQ(g.node(), world_rank() / 2);
  EXPECT_EQ(g.min_ranks_per_node(), n == 1 ? 1 : (n % 2 == 0 ? 2 : 1));
  EXPECT_EQ(comm_size(g.node_comm()), std::min(2, n - 2 * (world_rank() / 2)));
}

TEST(Grid, TensorGroupAcrossNodesIsRefusedOnEveryRankUnlessForced) {
  const int n = world_size();
  ASSERT_GE(n, 2) << "register this test at two ranks or more";
  // Two simulated nodes of n/2 ranks, one tensor group over all of them.
  GridOptions o;
  o.layout = {1, 1, n};
  o.simulate_ranks_per_node = n / 2;
  const std::string msg = grid_error(o);
  EXPECT_NE(msg.find("spans nodes 0 to 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--force-tp-across-nodes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--tp " + std::to_string(n / 2)), std::string::npos)
      << "suggests a tp that fits: " << msg;

  o.allow_tp_across_nodes = true;
  const Grid g = Grid::create(MPI_COMM_WORLD, o);
  EXPECT_TRUE(g.tp_crosses_nodes());

  // tp within a node passes.
  GridOptions fits;
  fits.layout = {0, 1, n / 2};
  fits.simulate_ranks_per_node = n / 2;
  EXPECT_EQ(grid_error(fits), "");

  // Nodes of three ranks: the tp=2 group {2,3} straddles the boundary at rank 3.
  if (n < 4) return; // two ranks make no such boundary
  GridOptions odd;
  odd.layout = {0, 1, 2};
  odd.simulate_ranks_per_node = 3;
  const std::string odd_msg = grid_error(odd);
  EXPECT_NE(odd_msg.find("ranks 2-3"), std::string::npos) << odd_msg;
}
