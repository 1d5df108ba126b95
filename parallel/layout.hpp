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
  int dp = 0; // 0: whatever the other axes leave
  int pp = 1; // 0: 1 unless dp is fixed, then what dp and tp leave
  int tp = 1; // 0: the largest divisor of what is left that fits on one node
};

// Parses one axis value: a positive integer or "auto" (returned as 0). Throws gridlm::Error
// naming the option (e.g. "--tp") and what it accepts.
int parse_axis(const std::string& option, const std::string& text);

// Every (dp, pp, tp) whose product is `world`, tp fastest-growing last.
std::vector<Layout> all_layouts(int world);

// Resolves automatic axes for `world` ranks with at most `ranks_per_node` ranks per node.
// Throws gridlm::Error when the request cannot fit, listing layouts that would.
Layout resolve_layout(int world, const LayoutRequest& request, int ranks_per_node);

// Up to `limit` layouts of `world` ranks, those keeping most of the requested axes first.
std::vector<Layout> suggest_layouts(int world, const LayoutRequest& request, int ranks_per_node,
                                    std::size_t limit);

} // namespace gridlm::parallel
