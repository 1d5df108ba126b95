// The watchdog's reasoning (parallel/hang_report.hpp) on made-up reports: who waits for whom,
// which rank it names, and the flight recorder's bookkeeping of waits that those reports read.
#include <gtest/gtest.h>

#include <vector>

#include <mpi.h>

#include "parallel/comm_mpi.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/hang_report.hpp"

namespace gridlm::parallel {
namespace {

using nlohmann::json;

flight::Record op(const char* name, const char* axis, int peer, int tag, int step,
                  std::vector<int> members = {}) {
  flight::Record r;
  r.op = name;
  r.axis = axis;
  r.peer = peer;
  r.tag = tag;
  r.step = step;
  r.bytes = 4096;
  r.members = std::make_shared<const std::vector<int>>(std::move(members));
  r.posted = 100.0;
  return r;
}

// A rank's report: waiting in `wait` since `since` (none when wait.op is empty), with `recent`.
json report(int rank, const flight::Record& wait, double since,
            std::vector<flight::Record> recent = {}) {
  flight::Snapshot s;
  s.waiting = *wait.op != '\0';
  s.wait = wait;
  s.wait_since = since;
  s.step = 2;
  s.phase_since = 90.0;
  s.recent = std::move(recent);
  return rank_report(RankIdentity{rank, "n0" + std::to_string(rank), rank, 0, 0}, s, true, 110.0);
}

const flight::Record none = op("", "", -1, -1, -1);

TEST(HangReport, RankOutsideCommunicationIsTheCulpritOfACollective) {
  const std::vector<int> dp{0, 1, 2};
  const auto a =
      analyse_hang({report(0, op("all_reduce", "dp", -1, -1, 2, dp), 101.0), report(1, none, 0.0),
                    report(2, op("all_reduce", "dp", -1, -1, 2, dp), 102.0)},
                   3);
  EXPECT_EQ(a.culprit, 1);
  EXPECT_NE(a.why.find("ranks 0, 2 wait for it"), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("rank 1 (dp 1, pp 0, tp 0) on n01: not in a communication operation"),
            std::string::npos)
      << a.why;
  EXPECT_NE(a.text.find("rank 0 (dp 0, pp 0, tp 0) on n00: waiting 9.0 s in all_reduce on dp "
                        "(4.0 KiB), in step 3"),
            std::string::npos)
      << a.text;
}

TEST(HangReport, AMissingReportIsSaidAndNamed) {
  const std::vector<int> tp{0, 1};
  const auto a = analyse_hang({report(0, op("all_reduce", "tp", -1, -1, 2, tp), 101.0)}, 2);
  EXPECT_EQ(a.culprit, 1);
  EXPECT_NE(a.text.find("rank 1 wrote no report"), std::string::npos) << a.text;
}

TEST(HangReport, ADroppedSendOutranksTheTimingOfWaits) {
  // Rank 1 waits for rank 0's activation; rank 0 dropped it and waits for rank 1's gradient,
  // since earlier than rank 1 (timing alone would name rank 1).
  flight::Record dropped = op("send", "pp", 1, 7, 2);
  dropped.skipped = true;
  const auto a = analyse_hang({report(0, op("recv", "pp", 1, 9, 2), 101.0, {dropped}),
                               report(1, op("recv", "pp", 0, 7, 2), 103.0)},
                              2);
  EXPECT_EQ(a.culprit, 0);
  EXPECT_NE(a.why.find("rank 0 skipped its send to rank 1 with tag 7 of step 3"), std::string::npos)
      << a.why;
}

TEST(HangReport, WhenAllWaitTheLastToStopWaitingIsNamed) {
  // Both receive from each other and neither posted the send: the rank whose wait began last
  // went on past the point where it should have served the other.
  const auto a = analyse_hang(
      {report(0, op("recv", "pp", 1, 9, 2), 105.0), report(1, op("recv", "pp", 0, 7, 2), 101.0)},
      2);
  EXPECT_EQ(a.culprit, 0);
  EXPECT_NE(a.why.find("rank 0 has not posted the send to rank 1 with tag 7"), std::string::npos)
      << a.why;
}

TEST(HangReport, NoWaitNoCulprit) {
  const auto a = analyse_hang({report(0, none, 0.0), report(1, none, 0.0)}, 2);
  EXPECT_EQ(a.culprit, -1);
}

TEST(FlightRecorder, RequestsMarkTheirWaitsAndCompletions) {
  flight::reset();
  MpiComm self(borrow_comm(MPI_COMM_SELF), "world");
  std::vector<float> data(16, 1.0f);
  flight::set_step(4);
  Request r = self.iall_reduce(Span<float>(data));
  flight::Snapshot s = flight::snapshot();
  ASSERT_EQ(s.recent.size(), 1u);
  EXPECT_STREQ(s.recent[0].op, "all_reduce");
  EXPECT_STREQ(s.recent[0].axis, "world");
  EXPECT_EQ(s.recent[0].bytes, 64u);
  EXPECT_EQ(s.recent[0].step, 4);
  EXPECT_FALSE(s.waiting); // posted, not yet waited on
  r.wait();
  s = flight::snapshot();
  EXPECT_FALSE(s.waiting);
  EXPECT_GE(s.recent[0].completed, s.recent[0].posted);
  {
    Request moved = self.iall_reduce(Span<float>(data));
    Request other(std::move(moved)); // the record travels with the request
  }
  s = flight::snapshot();
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_GE(s.recent[1].completed, 0.0);
  self.all_reduce(Span<float>(data)); // blocking: recorded and completed
  s = flight::snapshot();
  ASSERT_EQ(s.recent.size(), 3u);
  EXPECT_GE(s.recent[2].completed, 0.0);
  EXPECT_FALSE(s.waiting);
}

} // namespace
} // namespace gridlm::parallel
