// parallel::Grid on every factorisation of the world size: coordinates with tp fastest, axis
// communicators, pipeline neighbours, the gathered table; and impossible layouts refused on
// every rank (test_grid_nodes.cpp has the node check). Runs at 1, 2, 4 and 8 ranks.
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

TEST(Grid, EveryFactorisationHasTpFastestCoordinates) {
  const int n = world_size(), r = world_rank();
  for (const Layout& l : all_layouts(n)) {
    SCOPED_TRACE(l.str());
    GridOptions o;
    o.layout = {l.dp, l.pp, l.tp};
    const Grid g = Grid::create(MPI_COMM_WORLD, o);
    EXPECT_EQ(g.layout(), l);
    EXPECT_EQ(g.rank(), r);
    const Coords c = g.coords();
    EXPECT_EQ(r, (c.dp * l.pp + c.pp) * l.tp + c.tp);
    EXPECT_EQ(comm_size(g.axis_comm(Axis::dp)), l.dp);
    EXPECT_EQ(comm_size(g.axis_comm(Axis::pp)), l.pp);
    EXPECT_EQ(comm_size(g.axis_comm(Axis::tp)), l.tp);
    EXPECT_EQ(comm_rank(g.axis_comm(Axis::dp)), c.dp);
    EXPECT_EQ(comm_rank(g.axis_comm(Axis::pp)), c.pp);
    EXPECT_EQ(comm_rank(g.axis_comm(Axis::tp)), c.tp);
    EXPECT_EQ(g.is_first_stage(), c.pp == 0);
    EXPECT_EQ(g.is_last_stage(), c.pp == l.pp - 1);
    if (l.pp == 1) {
      EXPECT_EQ(g.pipeline_prev(), MPI_PROC_NULL);
      EXPECT_EQ(g.pipeline_next(), MPI_PROC_NULL);
    } else {
      EXPECT_EQ(g.pipeline_next(), (c.pp + 1) % l.pp);
      EXPECT_EQ(g.pipeline_prev(), (c.pp + l.pp - 1) % l.pp);
    }
    EXPECT_FALSE(g.tp_crosses_nodes()); // one real node
    EXPECT_EQ(g.num_nodes(), 1);

    const std::vector<RankInfo> table = g.gather_table();
    ASSERT_EQ(static_cast<int>(table.size()), n);
    for (const RankInfo& info : table) {
      EXPECT_EQ(info.rank, (info.coords.dp * l.pp + info.coords.pp) * l.tp + info.coords.tp);
      EXPECT_EQ(info.host, host_name());
    }
  }
}

TEST(Grid, AutoAxesResolveTheSameOnEveryRank) {
  GridOptions o;
  o.layout = {0, 1, 0}; // dp auto, tp fills the (single) node
  const Grid g = Grid::create(MPI_COMM_WORLD, o);
  EXPECT_EQ(g.layout(), (Layout{1, 1, world_size()}));
}

TEST(Grid, ImpossibleLayoutIsRefusedOnEveryRank) {
  const int n = world_size();
  GridOptions o;
  o.layout = {n + 1, 1, 1};
  const std::string msg = grid_error(o);
  EXPECT_NE(msg.find("but the job has " + std::to_string(n)), std::string::npos) << msg;
  EXPECT_NE(msg.find(Layout{n, 1, 1}.flags()), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind(n == 1 ? "rank 0:" : "ranks 0-" + std::to_string(n - 1) + ":", 0), 0u) << msg;
}
