// Layouts of a job's ranks as data x pipeline x tensor parallelism, as pure functions (no MPI)
// so that every rule is unit-tested: parsing "--tp auto", filling in automatic axes, and the
// error that lists layouts which would work.
#pragma once

#include <string>
#include <vector>

namespace gridlm::parallel {

struct Layout {
  int dp = 1; // data-parallel replicas
  int pp = 1; // pipeline stages
  int tp = 1; // tensor-parallel ranks per stage (one node at most)
  int size() const { return dp * pp * tp; }
  bool operator==(const Layout& o) const { return dp == o.dp && pp == o.pp && tp == o.tp; }
  // "dp 2 x pp 2 x tp 2"
  std::string str() const;
  // "--dp 2 --pp 2 --tp 2"
  std::string flags() const;
};

// What the user asked for; 0 on an axis means "auto".
struct LayoutRequest {
  int dp = 0;    // 0: whatever the other axes leave
  int pp = 1;    // 0: 1 unless dp is fixed, then what dp and tp leave
  int tp = 1;    // 0: the largest divisor of what is left whose groups stay inside nodes
  int heads = 0; // tp = 0 chooses a divisor of it too (the model's attention heads); 0: any
};

// Parses one axis value: a positive integer or "auto" (returned as 0). Throws gridlm::Error
// naming the option (e.g. "--tp") and what it accepts.
int parse_axis(const std::string& option, const std::string& text);

// Every (dp, pp, tp) whose product is `world`, tp fastest-growing last.
std::vector<Layout> all_layouts(int world);

// Whether tensor-parallel groups of `tp` consecutive world ranks each lie on one node, where
// rank r runs on node node_of_rank[r]: false for every tp > 1 when a launcher placed the ranks
// round-robin over the nodes, and for a tp that does not divide a node's block of ranks.
bool tp_fits_nodes(const std::vector<int>& node_of_rank, int tp);

// Why the tensor group of ranks [first_rank, first_rank + tp) cannot run across nodes node_lo
// to node_hi, and what to do: a layout with the same pp whose tensor groups stay inside nodes
// (with a tp dividing `heads` when given), or block placement when the launcher placed the ranks
// so that no tp > 1 does.
std::string tp_across_nodes_message(const Layout& layout, int first_rank, int node_lo, int node_hi,
                                    const std::vector<int>& node_of_rank, int heads = 0);

// Resolves automatic axes for `world` ranks with `ranks_per_node` ranks on each node, placed in
// blocks of consecutive ranks: an automatic tp is the largest that divides both what the other
// axes leave and a node. `node_of_rank` (rank r's node; empty: blocks of ranks_per_node) says
// where the ranks really are, for a job whose nodes hold different counts or a round-robin
// placement. Throws gridlm::Error when the request cannot fit, listing layouts that would.
Layout resolve_layout(int world, const LayoutRequest& request, int ranks_per_node,
                      const std::vector<int>& node_of_rank = {});

// Up to `limit` layouts of `world` ranks, those keeping most of the requested axes first.
std::vector<Layout> suggest_layouts(int world, const LayoutRequest& request, int ranks_per_node,
                                    std::size_t limit);

} // namespace gridlm::parallel
