// parallel::Grid: the job's ranks as an MPI Cartesian grid of data x pipeline x tensor
// parallelism, tp varying fastest, so that a tensor group is made of consecutive ranks (one
// node under block placement). Owns the Cartesian communicator and one sub-communicator per
// axis (MPI_Cart_sub), and knows which ranks share a node (MPI_COMM_TYPE_SHARED).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/layout.hpp"
#include "parallel/mpi_comm_handle.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::parallel {

enum class Axis { dp = 0, pp = 1, tp = 2 };
const char* axis_name(Axis a);
// What the ranks of an axis wait for: pipeline stages for their neighbours' ops, the others for
// peers computing the same op.
WaitFor axis_waits(Axis a);

struct GridOptions {
  LayoutRequest layout;               // requested axis sizes; 0 means auto
  bool allow_tp_across_nodes = false; // accept a tensor group that spans nodes (slow)
  int simulate_ranks_per_node = 0;    // >0: pretend nodes hold this many consecutive ranks (tests)
};

struct Coords {
  int dp = 0;
  int pp = 0;
  int tp = 0;
};

// What rank 0 prints about each rank.
struct RankInfo {
  int rank = 0;
  Coords coords;
  int node = 0; // index of the node, in order of its lowest rank
  std::string host;
};

class Grid {
public:
  // Collective over `world`. Every rank throws the same CollectiveError when the layout is
  // impossible or a tensor group would span nodes (unless allowed).
  static Grid create(MPI_Comm world, const GridOptions& options);

  const Layout& layout() const { return layout_; }
  const Coords& coords() const { return coords_; }
  // Grid coordinates of any rank of the grid.
  Coords coords_of(int rank) const;
  int rank() const { return rank_; }
  int size() const { return layout_.size(); }
  MPI_Comm comm() const { return *cart_; }
  // Sub-communicator of the ranks that differ from this one only along `axis`; its rank is
  // this rank's coordinate on that axis.
  MPI_Comm axis_comm(Axis axis) const;
  MpiCommHandle axis_handle(Axis axis) const;
  // An MPI-backend Comm over one axis.
  std::unique_ptr<Comm> make_mpi_comm(Axis axis) const;

  // Pipeline neighbours in the pp communicator. They wrap around (stage 0's previous is the
  // last stage), as interleaved schedules need; use is_first_stage()/is_last_stage() to stop.
  int pipeline_prev() const { return pipe_prev_; }
  int pipeline_next() const { return pipe_next_; }
  bool is_first_stage() const { return coords_.pp == 0; }
  bool is_last_stage() const { return coords_.pp == layout_.pp - 1; }

  int node() const { return node_; }
  int num_nodes() const { return num_nodes_; }
  int min_ranks_per_node() const { return min_ranks_per_node_; }
  MPI_Comm node_comm() const { return *node_comm_; }
  // True when some tensor group spans more than one node (only with allow_tp_across_nodes).
  bool tp_crosses_nodes() const { return tp_crosses_nodes_; }

  // Collective: every rank's coordinates, node and host, on every rank.
  std::vector<RankInfo> gather_table() const;

private:
  Grid() = default;

  Layout layout_;
  Coords coords_;
  int rank_ = 0;
  int pipe_prev_ = MPI_PROC_NULL;
  int pipe_next_ = MPI_PROC_NULL;
  int node_ = 0;
  int num_nodes_ = 1;
  int min_ranks_per_node_ = 1;
  bool tp_crosses_nodes_ = false;
  MpiCommHandle cart_;
  MpiCommHandle axis_[3];
  MpiCommHandle node_comm_;
  // Shared by the copies of this grid, so that where() names its coordinates exactly while one
  // of them lives.
  std::shared_ptr<const GridCoordinatesScope> coordinates_scope_;
};

} // namespace gridlm::parallel
