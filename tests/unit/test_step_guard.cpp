// The bad-step guard's parts (engine/step_guard.hpp): the robust loss estimate, the verdicts
// on one rank and agreed over ranks, and train.skip_steps' step lists.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <mpi.h>

#include "engine/step_guard.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {
namespace {

TEST(LossWindow, MedianAndMadOfTheNewestLosses) {
  LossWindow w(5);
  int step = 0;
  for (double v : {100.0, 1.0, 2.0, 3.0, 4.0, 10.0}) // 100 falls out of the window
    w.push(step++, v);
  EXPECT_EQ(w.size(), 5u);
  EXPECT_DOUBLE_EQ(w.median(), 3.0);
  EXPECT_DOUBLE_EQ(w.mad(), 1.0); // deviations 2 1 0 1 7
  w.push(step++, 5.0);            // 2 3 4 10 5: even counts are not needed, but odd stays odd
  EXPECT_DOUBLE_EQ(w.median(), 4.0);
  LossWindow even(4);
  for (double v : {1.0, 2.0, 3.0, 10.0})
    even.push(step++, v);
  EXPECT_DOUBLE_EQ(even.median(), 2.5);
}

// A rollback to the checkpoint of step 4 undoes steps 4 and 5 (0-based), which run again: their
// first losses leave the window rather than count twice.
TEST(LossWindow, ARollbackForgetsTheStepsItUndid) {
  LossWindow w(10);
  for (int step = 0; step < 6; ++step)
    w.push(step, step < 4 ? double(step + 1) : 9.0); // 1 2 3 4, then 9 9
  w.forget_from(4);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_DOUBLE_EQ(w.median(), 2.5);
  w.push(4, 5.0);
  w.push(5, 6.0);
  EXPECT_EQ(w.size(), 6u);
  EXPECT_DOUBLE_EQ(w.median(), 3.5); // 1 2 3 4 5 6 (with the undone 9 9 kept: 4.5)
  w.forget_from(7);                  // nothing newer
  EXPECT_EQ(w.size(), 6u);
  // A full window that forgets its newest two: the two before it come back.
  LossWindow full(4);
  for (int step = 0; step < 8; ++step)
    full.push(step, double(step)); // window 4 5 6 7
  EXPECT_DOUBLE_EQ(full.median(), 5.5);
  full.forget_from(6);
  EXPECT_EQ(full.size(), 4u);
  EXPECT_DOUBLE_EQ(full.median(), 3.5); // 2 3 4 5
}

parallel::Grid world() {
  parallel::GridOptions o;
  return parallel::Grid::create(MPI_COMM_WORLD, o);
}

TrainConfig spiky(double threshold) {
  TrainConfig t;
  t.spike_threshold = threshold;
  t.spike_window = 20;
  return t;
}

TEST(StepGuard, NonFiniteOnOneRankIsBadOnEvery) {
  const parallel::Grid grid = world();
  StepGuard guard(spiky(0.0), grid);
  EXPECT_FALSE(guard.check(3.0, 1.0).bad);
  const double inf = std::numeric_limits<double>::infinity();
  const StepGuard::Verdict v = guard.check(3.0, grid.rank() == grid.size() - 1 ? inf : 1.0);
  EXPECT_TRUE(v.bad);
  EXPECT_EQ(v.what, "the gradient norm is inf (rank " + std::to_string(grid.size() - 1) + ")");
  // A non-finite loss outranks a bad norm elsewhere: every rank names the same problem.
  const StepGuard::Verdict w =
      guard.check(grid.rank() == 0 ? std::nan("") : 3.0, grid.rank() == 0 ? 1.0 : inf);
  EXPECT_EQ(w.what, "the loss is nan (rank 0)");
}

TEST(StepGuard, ASpikeNeedsAFullEnoughWindowAndTheThreshold) {
  const parallel::Grid grid = world();
  StepGuard guard(spiky(6.0), grid);
  EXPECT_FALSE(guard.check(50.0, 1.0).bad); // no history yet: nothing to compare with
  for (std::size_t i = 0; i < spike_min_losses; ++i)
    guard.accept(int(i), 3.0 + 0.01 * double(i % 3)); // median 3.01, MAD 0.01: sigma 0.0148
  EXPECT_FALSE(guard.check(3.05, 1.0).bad);           // 2.7 sigma
  const StepGuard::Verdict v = guard.check(3.2, 1.0);
  EXPECT_TRUE(v.bad);
  EXPECT_NE(v.what.find("a loss spike: 3.2000 against a median of 3.0100 over the last 10"),
            std::string::npos)
      << v.what;
  StepGuard off(spiky(0.0), grid);
  for (std::size_t i = 0; i < spike_min_losses; ++i)
    off.accept(int(i), 3.0);
  EXPECT_FALSE(off.check(300.0, 1.0).bad);
}

TEST(StepGuard, EqualLossesDoNotMakeEveryRiseASpike) {
  const parallel::Grid grid = world();
  StepGuard guard(spiky(6.0), grid);
  for (std::size_t i = 0; i < spike_min_losses; ++i)
    guard.accept(int(i), 2.0); // MAD 0: the floor, 0.1% of the median, is the scale
  EXPECT_FALSE(guard.check(2.01, 1.0).bad);
  EXPECT_TRUE(guard.check(2.02, 1.0).bad);
}

TEST(StepList, StepsAndRangesFromOne) {
  EXPECT_EQ(parse_step_list("", "k"), std::set<int>{});
  EXPECT_EQ(parse_step_list("3", "k"), std::set<int>{2});
  EXPECT_EQ(parse_step_list("3, 7,10-12", "k"), (std::set<int>{2, 6, 9, 10, 11}));
  for (const char* bad : {"0", "x", "3,", "5-4", "1-2-3", "-2", "3;4"})
    EXPECT_THROW(parse_step_list(bad, "train.skip_steps"), Error) << bad;
  try {
    parse_step_list("3,x", "train.skip_steps");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.skip_steps = \"3,x\": 'x' is not a step"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace gridlm::engine
