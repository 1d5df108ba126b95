// Layout rules without MPI: parsing axis values, filling automatic axes, and the suggestions
// printed when a layout cannot work.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "parallel/diagnostics.hpp"
#include "parallel/layout.hpp"

using gridlm::Error;
using namespace gridlm::parallel;

namespace {

std::string error_of(int world, LayoutRequest r, int rpn = 8) {
  try {
    resolve_layout(world, r, rpn);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(ParseAxis, AcceptsPositiveNumbersAndAuto) {
  EXPECT_EQ(parse_axis("--tp", "4"), 4);
  EXPECT_EQ(parse_axis("--tp", "1"), 1);
  EXPECT_EQ(parse_axis("--tp", "auto"), 0);
}

TEST(ParseAxis, RejectsEverythingElseNamingTheOption) {
  for (const char* bad : {"0", "-1", "two", "", "2.5", "4x", "1234567890", " 2", "AUTO"}) {
    try {
      parse_axis("--pp", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--pp"), std::string::npos) << e.what();
    }
  }
}

TEST(AllLayouts, EnumeratesEveryFactorisationOnce) {
  const std::vector<Layout> eight = all_layouts(8);
  EXPECT_EQ(eight.size(), 10u); // ordered triples with product 8 = C(3+2, 2)
  std::set<std::tuple<int, int, int>> seen;
  for (const Layout& l : eight) {
    EXPECT_EQ(l.size(), 8);
    EXPECT_TRUE(seen.insert({l.dp, l.pp, l.tp}).second);
  }
  EXPECT_EQ(all_layouts(1).size(), 1u);
  EXPECT_EQ(all_layouts(12).size(), 18u);
}

TEST(ResolveLayout, FixedAxesMustMultiplyToTheWorld) {
  EXPECT_EQ(resolve_layout(8, {2, 2, 2}, 8), (Layout{2, 2, 2}));
  const std::string msg = error_of(8, {3, 2, 2});
  EXPECT_NE(msg.find("12 ranks, but the job has 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--dp 2 --pp 2 --tp 2"), std::string::npos) << msg;
  // The closest layout (keeping pp and tp) is suggested first.
  EXPECT_LT(msg.find("--dp 2 --pp 2 --tp 2"), msg.find("--dp 8 --pp 1 --tp 1")) << msg;
}

TEST(ResolveLayout, AutoAxesFillWhatIsLeft) {
  EXPECT_EQ(resolve_layout(8, {0, 1, 1}, 8), (Layout{8, 1, 1}));
  EXPECT_EQ(resolve_layout(8, {0, 2, 2}, 8), (Layout{2, 2, 2}));
  EXPECT_EQ(resolve_layout(8, {2, 0, 2}, 8), (Layout{2, 2, 2}));
  EXPECT_EQ(resolve_layout(8, {2, 2, 0}, 8), (Layout{2, 2, 2}));
  // tp=auto fills a node, dp takes the rest.
  EXPECT_EQ(resolve_layout(16, {0, 1, 0}, 4), (Layout{4, 1, 4}));
  // tp=auto never exceeds a node even when more ranks are left.
  EXPECT_EQ(resolve_layout(12, {1, 0, 0}, 4), (Layout{1, 3, 4}));
  // pp=auto stays 1 when dp is automatic too.
  EXPECT_EQ(resolve_layout(8, {0, 0, 1}, 8), (Layout{8, 1, 1}));
  EXPECT_EQ(resolve_layout(8, {0, 0, 0}, 2), (Layout{4, 1, 2}));
  EXPECT_EQ(resolve_layout(1, {0, 0, 0}, 1), (Layout{1, 1, 1}));
}

TEST(ResolveLayout, AutoCannotRescueAnIndivisibleWorld) {
  const std::string msg = error_of(8, {0, 3, 1});
  EXPECT_NE(msg.find("multiple of 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Layouts of 8 ranks that would work"), std::string::npos) << msg;
  EXPECT_NE(error_of(4, {0, 1, 8}), "");
}

TEST(ResolveLayout, SuggestionsAreCappedAndValid) {
  const std::vector<Layout> s = suggest_layouts(1024, {3, 1, 1}, 4, 10);
  EXPECT_EQ(s.size(), 10u);
  for (const Layout& l : s)
    EXPECT_EQ(l.size(), 1024);
}

// An automatic tp keeps its groups inside nodes: it divides a node, not just fits in one (it
// chose 4 for 12 ranks in nodes of 6 at pp 3, whose group of ranks 4-7 spans two nodes).
TEST(ResolveLayout, AutoTpDividesANode) {
  EXPECT_EQ(resolve_layout(12, {0, 3, 0}, 6), (Layout{2, 3, 2}));
  EXPECT_EQ(resolve_layout(72, {0, 3, 0}, 36), (Layout{2, 3, 12}));
  EXPECT_EQ(resolve_layout(72, {1, 3, 0}, 36), (Layout{1, 3, 24})) << "dp and pp fixed: tp is set";
  // Nodes of 6 and 4 ranks: tp 5 divides 10 but its second group spans both.
  const std::vector<int> six_and_four{0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(resolve_layout(10, {0, 1, 0}, 4, six_and_four), (Layout{5, 1, 2}));
  // Round-robin placement: no tp > 1 stays inside a node.
  EXPECT_EQ(resolve_layout(4, {0, 1, 0}, 2, {0, 1, 0, 1}), (Layout{4, 1, 1}));
  EXPECT_EQ(resolve_layout(4, {0, 1, 0}, 2, {0, 0, 1, 1}), (Layout{2, 1, 2}));
}

TEST(TpFitsNodes, EveryGroupOnOneNode) {
  EXPECT_TRUE(tp_fits_nodes({0, 0, 1, 1}, 2));
  EXPECT_TRUE(tp_fits_nodes({0, 0, 1, 1}, 1));
  EXPECT_FALSE(tp_fits_nodes({0, 0, 1, 1}, 4));
  EXPECT_FALSE(tp_fits_nodes({0, 0, 0, 1, 1, 1}, 2)); // ranks 2-3
  EXPECT_FALSE(tp_fits_nodes({0, 1, 0, 1}, 2));
  EXPECT_FALSE(tp_fits_nodes({0, 0, 0}, 2)) << "does not divide the ranks";
}

TEST(TpAcrossNodesMessage, SuggestsALayoutThatFitsAndNeverTheOneRefused) {
  // 12 ranks in nodes of 6 at pp 3: tp 4 refused, tp 2 suggested.
  const std::vector<int> blocks{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
  const std::string msg = tp_across_nodes_message({1, 3, 4}, 4, 0, 1, blocks);
  EXPECT_NE(msg.find("ranks 4-7 spans nodes 0 to 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ranks per node (6 here), for example --dp 2 --pp 3 --tp 2"),
            std::string::npos)
      << msg;
  // Round-robin: every tp > 1 spans nodes; say how to place the ranks, suggest no tp > 1.
  const std::string rr = tp_across_nodes_message({2, 1, 2}, 0, 0, 1, {0, 1, 0, 1});
  EXPECT_NE(rr.find("placed consecutive ranks on different nodes"), std::string::npos) << rr;
  EXPECT_NE(rr.find("srun -m block"), std::string::npos) << rr;
  EXPECT_EQ(rr.find("--dp 2 --pp 1 --tp 2"), std::string::npos) << rr;
}

// tp = auto takes a divisor of the model's heads: 6 heads on nodes of 4 run at tp 2, not 4.
TEST(ResolveLayout, AutoTpDividesTheHeads) {
  EXPECT_EQ(resolve_layout(4, {0, 1, 0, 6}, 4), (Layout{2, 1, 2}));
  EXPECT_EQ(resolve_layout(4, {0, 1, 0, 1}, 4), (Layout{4, 1, 1}));
  EXPECT_EQ(resolve_layout(4, {0, 1, 0, 0}, 4), (Layout{1, 1, 4})) << "heads 0: any";
}

// Placements in planes of two ranks (srun -m plane=2): tp 2 stays inside nodes, so a refused
// tp 4 is told to use it, not to move to block placement; and a suggestion divides the heads.
TEST(TpAcrossNodesMessage, PlanesAndHeads) {
  const std::vector<int> planes{0, 0, 1, 1, 0, 0, 1, 1};
  EXPECT_EQ(resolve_layout(8, {0, 1, 0}, 4, planes), (Layout{4, 1, 2}));
  const std::string msg = tp_across_nodes_message({2, 1, 4}, 0, 0, 1, planes);
  EXPECT_NE(msg.find("for example --dp 4 --pp 1 --tp 2"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("srun -m block"), std::string::npos) << msg;
  const std::vector<int> blocks{0, 0, 0, 0, 1, 1, 1, 1};
  const std::string six = tp_across_nodes_message({1, 1, 8}, 0, 0, 1, blocks, 6);
  EXPECT_NE(six.find("for example --dp 4 --pp 1 --tp 2"), std::string::npos) << six;
  EXPECT_NE(tp_across_nodes_message({1, 1, 8}, 0, 0, 1, blocks).find("--dp 2 --pp 1 --tp 4"),
            std::string::npos);
}
