// Layout parsing, resolution and suggestions.
#include "parallel/layout.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::parallel {

std::string Layout::str() const { return fmt::format("dp {} x pp {} x tp {}", dp, pp, tp); }

std::string Layout::flags() const { return fmt::format("--dp {} --pp {} --tp {}", dp, pp, tp); }

int parse_axis(const std::string& option, const std::string& text) {
  if (text == "auto") return 0;
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isdigit(c) != 0;
  });
  if (!digits) {
    throw Error(fmt::format("{} {}: expected a positive whole number or 'auto'", option,
                            text.empty() ? "''" : text));
  }
  if (text.size() > 9) {
    throw Error(fmt::format("{} {}: too large for a rank count", option, text));
  }
  const int value = std::stoi(text);
  if (value == 0) {
    throw Error(fmt::format("{} 0: an axis needs at least one rank; use 1, or 'auto'", option));
  }
  return value;
}

std::vector<Layout> all_layouts(int world) {
  std::vector<Layout> out;
  for (int dp = 1; dp <= world; ++dp) {
    if (world % dp != 0) continue;
    for (int pp = 1; pp <= world / dp; ++pp) {
      if ((world / dp) % pp != 0) continue;
      out.push_back(Layout{dp, pp, world / dp / pp});
    }
  }
  return out;
}

namespace {

// The largest divisor of n that `fits`, 1 when no larger one does.
template <typename Fits>
int largest_divisor_that_fits(int n, Fits fits) {
  for (int d = n; d > 1; --d) {
    if (n % d == 0 && fits(d)) return d;
  }
  return 1;
}

std::string describe_request(const LayoutRequest& r) {
  auto axis = [](int v) { return v == 0 ? std::string("auto") : std::to_string(v); };
  return fmt::format("--dp {} --pp {} --tp {}", axis(r.dp), axis(r.pp), axis(r.tp));
}

[[noreturn]] void fail(int world, const LayoutRequest& request, int ranks_per_node,
                       const std::string& why) {
  std::string text = fmt::format(
      "cannot lay out {} ranks as {}: {}.\n  Layouts of {} ranks that would work:", world,
      describe_request(request), why, world);
  for (const Layout& l : suggest_layouts(world, request, ranks_per_node, 10)) {
    text += "\n    " + l.flags();
  }
  throw Error(text);
}

} // namespace

std::vector<Layout> suggest_layouts(int world, const LayoutRequest& request, int ranks_per_node,
                                    std::size_t limit) {
  std::vector<Layout> layouts = all_layouts(world);
  auto score = [&](const Layout& l) {
    int s = 0;
    if (request.dp != 0 && l.dp == request.dp) s += 4;
    if (request.pp != 0 && l.pp == request.pp) s += 4;
    if (request.tp != 0 && l.tp == request.tp) s += 4;
    if (ranks_per_node % l.tp == 0) s += 2; // its tensor groups can stay inside nodes
    return s;
  };
  std::stable_sort(layouts.begin(), layouts.end(),
                   [&](const Layout& a, const Layout& b) { return score(a) > score(b); });
  if (layouts.size() > limit) layouts.resize(limit);
  return layouts;
}

bool tp_fits_nodes(const std::vector<int>& node_of_rank, int tp) {
  if (tp < 1 || node_of_rank.size() % std::size_t(tp) != 0) return false;
  for (std::size_t r = 0; r < node_of_rank.size(); ++r) {
    if (node_of_rank[r] != node_of_rank[r - r % std::size_t(tp)]) return false;
  }
  return true;
}

std::string tp_across_nodes_message(const Layout& layout, int first_rank, int node_lo, int node_hi,
                                    const std::vector<int>& node_of_rank, int heads) {
  std::string text = fmt::format(
      "the tensor-parallel group of ranks {}-{} spans nodes {} to {}: tensor parallelism "
      "exchanges activations in every layer and needs the links inside one node. ",
      first_rank, first_rank + layout.tp - 1, node_lo, node_hi);
  // The closest layout that fits: same pp, the largest tp whose groups stay inside nodes (and,
  // given the heads, that divides them).
  const Layout* best = nullptr;
  const std::vector<Layout> layouts = all_layouts(int(node_of_rank.size()));
  for (const Layout& l : layouts) {
    if (l.pp == layout.pp && !(l == layout) && tp_fits_nodes(node_of_rank, l.tp) &&
        (heads == 0 || heads % l.tp == 0) && (!best || l.tp > best->tp)) {
      best = &l;
    }
  }
  const bool blocks = std::is_sorted(node_of_rank.begin(), node_of_rank.end());
  if (!blocks && (best == nullptr || best->tp == 1)) {
    // Round-robin placement: no tp > 1 keeps its group inside a node, whatever its size.
    text += "The launcher placed consecutive ranks on different nodes: launch with block "
            "placement (srun -m block, or host:N entries in an MPICH host file) so that a node "
            "holds consecutive ranks, or use --tp 1";
  } else {
    std::map<int, int> ranks_on; // node -> its ranks
    for (const int node : node_of_rank)
      ++ranks_on[node];
    int fewest = INT_MAX;
    for (const auto& entry : ranks_on)
      fewest = std::min(fewest, entry.second);
    text += blocks ? fmt::format("Use a tp that divides the ranks per node ({} here)", fewest)
                   : std::string("Use a tp whose groups of consecutive ranks stay inside a node "
                                 "as the launcher placed them");
    if (best) text += ", for example " + best->flags();
  }
  text += "; or pass --force-tp-across-nodes to run anyway.";
  return text;
}

Layout resolve_layout(int world, const LayoutRequest& request, int ranks_per_node,
                      const std::vector<int>& node_of_rank) {
  if (world < 1) throw Error(fmt::format("a grid needs at least one rank, not {}", world));
  for (int v : {request.dp, request.pp, request.tp}) {
    if (v < 0) fail(world, request, ranks_per_node, "axis sizes must be positive or 'auto'");
  }
  long long fixed = 1;
  for (int v : {request.dp, request.pp, request.tp}) {
    if (v > 0) fixed *= v;
  }
  const bool any_auto = request.dp == 0 || request.pp == 0 || request.tp == 0;
  if (!any_auto && fixed != world) {
    fail(world, request, ranks_per_node,
         fmt::format("{} x {} x {} = {} ranks, but the job has {}", request.dp, request.pp,
                     request.tp, fixed, world));
  }
  if (fixed > world || world % fixed != 0) {
    fail(
        world, request, ranks_per_node,
        fmt::format("the fixed axes need a multiple of {} ranks, and {} is not one", fixed, world));
  }
  int left = static_cast<int>(world / fixed);
  Layout out{request.dp, request.pp, request.tp};
  if (out.tp == 0) {
    const auto fits = [&](int tp) {
      return (request.heads == 0 || request.heads % tp == 0) &&
             (node_of_rank.empty() ? ranks_per_node % tp == 0 : tp_fits_nodes(node_of_rank, tp));
    };
    out.tp = (request.dp != 0 && request.pp != 0) ? left : largest_divisor_that_fits(left, fits);
    left /= out.tp;
  }
  if (out.pp == 0) {
    out.pp = request.dp != 0 ? left : 1;
    left /= out.pp;
  }
  if (out.dp == 0) {
    out.dp = left;
    left = 1;
  }
  return out;
}

} // namespace gridlm::parallel
