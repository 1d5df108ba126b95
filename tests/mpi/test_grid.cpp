// parallel::Grid on every factorisation of the world size: coordinates with tp fastest, axis
// communicators, pipeline neighbours, the gathered table; impossible layouts refused on every
// rank (test_grid_nodes.cpp has the node check); where() naming the coordinates of the grid that
// lives, and of none once it is gone. Runs at 1, 2, 4 and 8 ranks.
#include <gtest/gtest.h>

#include <mpi.h>

#include <optional>
#include <string>

#include <fmt/format.h>

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

namespace {

// The grid part of where(): ", grid (dp X, pp Y, tp Z)", or "" when it names no grid.
std::string where_grid_part() {
  const std::string text = where();
  const std::size_t at = text.find(", grid (");
  return at == std::string::npos ? "" : text.substr(at);
}

std::string grid_part_of(const Grid& g) {
  return fmt::format(", grid (dp {}, pp {}, tp {})", g.coords().dp, g.coords().pp, g.coords().tp);
}

} // namespace

TEST(Grid, WhereNamesTheCoordinatesOfTheGridThatLives) {
  ASSERT_EQ(where_grid_part(), "") << "a grid made earlier in this process is still registered";
  GridOptions by_rank;
  by_rank.layout = {world_size(), 1, 1}; // dp is the rank, so ranks > 0 differ from a self grid
  std::optional<Grid> world = Grid::create(MPI_COMM_WORLD, by_rank);
  const std::string world_part = grid_part_of(*world);
  EXPECT_EQ(where_grid_part(), world_part);

  // A grid over MPI_COMM_SELF (coordinates 0, 0, 0) made while the world grid lives, as tests
  // do; its registration lasts while any copy of it does, then the world grid's is back.
  std::optional<Grid> copy;
  {
    const Grid self = Grid::create(MPI_COMM_SELF, GridOptions{});
    EXPECT_EQ(where_grid_part(), ", grid (dp 0, pp 0, tp 0)");
    copy = self;
  }
  EXPECT_EQ(where_grid_part(), ", grid (dp 0, pp 0, tp 0)")
      << "a copy of the self grid still lives";
  copy.reset();
  EXPECT_EQ(where_grid_part(), world_part);

  // Dropped out of order: the world grid goes while a self grid lives, and is not named again.
  copy = Grid::create(MPI_COMM_SELF, GridOptions{});
  world.reset();
  EXPECT_EQ(where_grid_part(), ", grid (dp 0, pp 0, tp 0)");
  copy.reset();
  EXPECT_EQ(where_grid_part(), "");
}

TEST(Grid, AnErrorKeepsTheCoordinatesWhereItWasThrown) {
  GridOptions by_rank;
  by_rank.layout = {world_size(), 1, 1};
  std::optional<Grid> grid = Grid::create(MPI_COMM_WORLD, by_rank);
  const std::string part = grid_part_of(*grid);
  const gridlm::Error thrown("inside the grid");
  grid.reset();
  // The job's last report (abort_job from main) runs after the grid is gone: the error still
  // says where it happened.
  EXPECT_EQ(thrown.grid_context(), part);
  EXPECT_EQ(gridlm::Error("outside any grid").grid_context(), "");
}
