// Stage layouts: parsing, checking, and the balanced partition (a small dynamic programme over
// contiguous splits, exact for the cost estimate).
#include "parallel/stage_layout.hpp"

#include "parallel/int_list.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::parallel {
namespace {

// Middle virtual stages need a block; the first and last may hold only the embedding or head.
void check_counts(const StageCostModel& m, const std::vector<int>& blocks,
                  const std::string& layout) {
  const int Q = int(blocks.size());
  for (int q = 0; q < Q; ++q) {
    if (blocks[q] < 0 || (blocks[q] == 0 && q > 0 && q < Q - 1)) {
      throw Error(fmt::format("parallel.stage_layout = '{}' gives virtual stage {} {} blocks; "
                              "every stage but the first and the last needs at least one",
                              layout, q, blocks[q]));
    }
  }
  const int sum = std::accumulate(blocks.begin(), blocks.end(), 0);
  if (sum != m.blocks) {
    throw Error(fmt::format("parallel.stage_layout = '{}' assigns {} blocks but the model has "
                            "model.n_layer = {}: every block must be assigned exactly once",
                            layout, sum, m.blocks));
  }
}

std::vector<int> balanced(const StageCostModel& m, int Q) {
  const int L = m.blocks;
  if (L < Q - 2) {
    throw Error(fmt::format("parallel.stage_layout = 'balanced': {} blocks cannot fill {} "
                            "virtual stages; use fewer stages or chunks",
                            L, Q));
  }
  auto cost = [&](int q, int n) {
    double c = n * m.block;
    if (q == 0) c += m.embedding;
    if (q == Q - 1) c += m.head;
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[q][i]: the least possible costliest stage when stages 0..q hold blocks [0, i).
  std::vector<std::vector<double>> best(Q, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> take(Q, std::vector<int>(L + 1, 0));
  for (int i = 0; i <= L; ++i)
    best[0][i] = cost(0, i);
  for (int q = 1; q < Q; ++q) {
    const int least = q == Q - 1 ? 0 : 1;
    for (int i = 0; i <= L; ++i) {
      for (int n = least; n <= i; ++n) {
        const double c = std::max(best[q - 1][i - n], cost(q, n));
        if (c < best[q][i]) {
          best[q][i] = c;
          take[q][i] = n;
        }
      }
    }
  }
  std::vector<int> blocks(Q);
  int i = L;
  for (int q = Q - 1; q > 0; --q) {
    blocks[q] = take[q][i];
    i -= blocks[q];
  }
  blocks[0] = i;
  return blocks;
}

} // namespace

std::vector<int> plan_stage_blocks(const StageCostModel& m, int Q, const std::string& layout) {
  if (Q < 1) throw Error("a pipeline needs at least one virtual stage");
  std::vector<int> blocks;
  if (layout == "uniform") {
    if (m.blocks % Q != 0) {
      const std::string what = fmt::format(
          "model.n_layer = {} does not divide into parallel.pp x parallel.chunks = {} equal "
          "stages (parallel.stage_layout = 'uniform'); choose a pp and chunks whose product "
          "divides {}",
          m.blocks, Q, m.blocks);
      // Balanced and explicit layouts need a block for every stage but the first and the last.
      if (m.blocks < Q - 2) throw Error(what);
      throw Error(fmt::format("{}, or set parallel.stage_layout = 'balanced' or explicit counts "
                              "such as '{}'",
                              what, stage_blocks_text(balanced(m, Q))));
    }
    blocks.assign(std::size_t(Q), m.blocks / Q);
  } else if (layout == "balanced") {
    blocks = balanced(m, Q);
  } else {
    std::string bad;
    const auto counts = parse_int_list(layout, &bad);
    for (long n : counts.value_or(std::vector<long>{})) {
      if (n < INT_MIN || n > INT_MAX) {
        bad = std::to_string(n);
        break;
      }
      blocks.push_back(int(n));
    }
    if (!counts || !bad.empty()) {
      throw Error(fmt::format("parallel.stage_layout = '{}': '{}' is not a block count; use "
                              "'uniform', 'balanced' or counts such as '3,4,4,3'",
                              layout, bad));
    }
    if (int(blocks.size()) != Q) {
      throw Error(fmt::format("parallel.stage_layout = '{}' names {} stages, but parallel.pp x "
                              "parallel.chunks = {} virtual stages; give one block count per "
                              "virtual stage (q = chunk x pp + stage)",
                              layout, blocks.size(), Q));
    }
  }
  check_counts(m, blocks, layout);
  return blocks;
}

std::vector<double> stage_costs(const StageCostModel& m, const std::vector<int>& blocks) {
  std::vector<double> c;
  const int Q = int(blocks.size());
  for (int q = 0; q < Q; ++q) {
    c.push_back(blocks[q] * m.block + (q == 0 ? m.embedding : 0.0) + (q == Q - 1 ? m.head : 0.0));
  }
  return c;
}

std::string stage_blocks_text(const std::vector<int>& blocks) {
  std::string s;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    s += (i ? "," : "") + std::to_string(blocks[i]);
  return s;
}

} // namespace gridlm::parallel
