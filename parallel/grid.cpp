// Construction of the Cartesian grid, its axis communicators and the node check.
#include "parallel/grid.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::parallel {

WaitFor axis_waits(Axis a) { return a == Axis::pp ? WaitFor::neighbour_op : WaitFor::peers; }

const char* axis_name(Axis a) {
  switch (a) {
  case Axis::dp: return "dp";
  case Axis::pp: return "pp";
  case Axis::tp: return "tp";
  }
  return "?";
}

Grid Grid::create(MPI_Comm world, const GridOptions& options) {
  Grid g;
  int world_rank = 0, world_size = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_rank(world, &world_rank));
  GRIDLM_MPI_CHECK(MPI_Comm_size(world, &world_size));
  g.rank_ = world_rank;

  // Nodes: index each by its lowest world rank.
  g.node_comm_ = split_nodes(world, options.simulate_ranks_per_node);
  int leader = 0, node_ranks = 0;
  GRIDLM_MPI_CHECK(MPI_Allreduce(&world_rank, &leader, 1, MPI_INT, MPI_MIN, *g.node_comm_));
  GRIDLM_MPI_CHECK(MPI_Comm_size(*g.node_comm_, &node_ranks));
  std::vector<int> leaders(world_size);
  GRIDLM_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world));
  std::vector<int> unique_leaders = leaders;
  std::sort(unique_leaders.begin(), unique_leaders.end());
  unique_leaders.erase(std::unique(unique_leaders.begin(), unique_leaders.end()),
                       unique_leaders.end());
  g.num_nodes_ = static_cast<int>(unique_leaders.size());
  std::vector<int> node_of_rank(leaders.size()); // world rank -> node index
  for (std::size_t r = 0; r < leaders.size(); ++r) {
    node_of_rank[r] =
        int(std::lower_bound(unique_leaders.begin(), unique_leaders.end(), leaders[r]) -
            unique_leaders.begin());
  }
  g.node_ =
      static_cast<int>(std::lower_bound(unique_leaders.begin(), unique_leaders.end(), leader) -
                       unique_leaders.begin());
  GRIDLM_MPI_CHECK(MPI_Allreduce(&node_ranks, &g.min_ranks_per_node_, 1, MPI_INT, MPI_MIN, world));

  run_agreed(world, [&] {
    g.layout_ = resolve_layout(world_size, options.layout, g.min_ranks_per_node_, node_of_rank);
  });

  // tp varies fastest: dims are (dp, pp, tp) in row-major rank order. No reordering, so world
  // rank r is grid rank r and consecutive ranks (one node under block placement) share a tp
  // group. The pp axis is periodic for interleaved schedules.
  const std::array<int, 3> dims{g.layout_.dp, g.layout_.pp, g.layout_.tp};
  const std::array<int, 3> periods{0, 1, 0};
  MPI_Comm cart = MPI_COMM_NULL;
  GRIDLM_MPI_CHECK(MPI_Cart_create(world, 3, dims.data(), periods.data(), 0, &cart));
  g.cart_ = own_comm(cart);
  std::array<int, 3> c{};
  GRIDLM_MPI_CHECK(MPI_Cart_coords(cart, world_rank, 3, c.data()));
  g.coords_ = Coords{c[0], c[1], c[2]};
  for (int axis = 0; axis < 3; ++axis) {
    std::array<int, 3> remain{0, 0, 0};
    remain[axis] = 1;
    MPI_Comm sub = MPI_COMM_NULL;
    GRIDLM_MPI_CHECK(MPI_Cart_sub(cart, remain.data(), &sub));
    g.axis_[axis] = own_comm(sub);
  }
  if (g.layout_.pp > 1) {
    g.pipe_prev_ = (g.coords_.pp + g.layout_.pp - 1) % g.layout_.pp;
    g.pipe_next_ = (g.coords_.pp + 1) % g.layout_.pp;
  }
  g.coordinates_scope_ =
      std::make_shared<const GridCoordinatesScope>(g.coords_.dp, g.coords_.pp, g.coords_.tp);

  // A tensor group must live on one node unless the user insists.
  std::array<int, 2> span{g.node_, -g.node_};
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, span.data(), 2, MPI_INT, MPI_MIN,
                                 *g.axis_[static_cast<int>(Axis::tp)]));
  const int node_lo = span[0], node_hi = -span[1];
  const int crosses = node_lo != node_hi ? 1 : 0;
  int any_crosses = 0;
  GRIDLM_MPI_CHECK(MPI_Allreduce(&crosses, &any_crosses, 1, MPI_INT, MPI_MAX, world));
  g.tp_crosses_nodes_ = any_crosses != 0;
  if (!options.allow_tp_across_nodes) {
    agree_on_errors(world,
                    crosses ? tp_across_nodes_message(g.layout_, world_rank - g.coords_.tp, node_lo,
                                                      node_hi, node_of_rank, options.layout.heads)
                            : std::string());
  }
  return g;
}

MPI_Comm Grid::axis_comm(Axis axis) const { return *axis_[static_cast<int>(axis)]; }

MpiCommHandle Grid::axis_handle(Axis axis) const { return axis_[static_cast<int>(axis)]; }

std::unique_ptr<Comm> Grid::make_mpi_comm(Axis axis) const {
  return std::make_unique<MpiComm>(axis_handle(axis), axis_name(axis), axis_waits(axis));
}

std::vector<RankInfo> Grid::gather_table() const {
  constexpr int host_len = 256;
  const int n = size();
  std::array<int, 4> mine{coords_.dp, coords_.pp, coords_.tp, node_};
  std::vector<int> all(4 * static_cast<std::size_t>(n));
  GRIDLM_MPI_CHECK(MPI_Allgather(mine.data(), 4, MPI_INT, all.data(), 4, MPI_INT, *cart_));
  std::array<char, host_len> host{};
  std::strncpy(host.data(), host_name().c_str(), host_len - 1);
  std::vector<char> hosts(static_cast<std::size_t>(host_len) * n);
  GRIDLM_MPI_CHECK(
      MPI_Allgather(host.data(), host_len, MPI_CHAR, hosts.data(), host_len, MPI_CHAR, *cart_));
  std::vector<RankInfo> table(n);
  for (int r = 0; r < n; ++r) {
    table[r].rank = r;
    table[r].coords = Coords{all[4 * r], all[4 * r + 1], all[4 * r + 2]};
    table[r].node = all[4 * r + 3];
    table[r].host = std::string(&hosts[static_cast<std::size_t>(host_len) * r]);
  }
  return table;
}

Coords Grid::coords_of(int rank) const {
  std::array<int, 3> c{};
  GRIDLM_MPI_CHECK(MPI_Cart_coords(*cart_, rank, 3, c.data()));
  return Coords{c[0], c[1], c[2]};
}

} // namespace gridlm::parallel
