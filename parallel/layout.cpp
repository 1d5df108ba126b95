// Layout parsing, resolution and suggestions.
#include "parallel/layout.hpp"

#include <algorithm>
#include <cctype>
#include <climits>

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

int largest_divisor_at_most(int n, int cap) {
  for (int d = std::min(n, std::max(cap, 1)); d >= 1; --d) {
    if (n % d == 0) return d;
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
    if (l.tp <= ranks_per_node) s += 2;
    return s;
  };
  std::stable_sort(layouts.begin(), layouts.end(),
                   [&](const Layout& a, const Layout& b) { return score(a) > score(b); });
  if (layouts.size() > limit) layouts.resize(limit);
  return layouts;
}

Layout resolve_layout(int world, const LayoutRequest& request, int ranks_per_node) {
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
    out.tp =
        (request.dp != 0 && request.pp != 0) ? left : largest_divisor_at_most(left, ranks_per_node);
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
