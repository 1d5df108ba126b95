// The watchdog's reasoning (parallel/hang_report.hpp) on made-up reports: who waits for whom,
// which rank it names, and the flight recorder's bookkeeping of waits that those reports read.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <mpi.h>
#include <unistd.h>

#include "parallel/comm_mpi.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/hang_report.hpp"
#include "parallel/watchdog.hpp"

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
            std::vector<flight::Record> recent = {}, std::vector<flight::Record> earlier = {}) {
  flight::Snapshot s;
  s.waiting = *wait.op != '\0';
  s.wait = wait;
  s.wait_since = since;
  s.step = 2;
  s.phase_since = 90.0;
  s.recent = std::move(recent);
  s.earlier = std::move(earlier);
  return rank_report(RankIdentity{rank, "n0" + std::to_string(rank), rank, 0, 0}, s, 110.0 - rank,
                     "hang 1", 110.0);
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

// The files count steps as the log does: a rank in (0-based) step 2 and its records say 3.
TEST(HangReport, ReportsCountStepsFromOne) {
  const json r =
      report(0, op("all_reduce", "dp", -1, -1, 2, {0, 1}), 101.0, {op("send", "pp", 1, 7, 2)});
  EXPECT_EQ(r["step"], 3);
  EXPECT_EQ(r["waiting"]["step"], 3);
  EXPECT_EQ(r["recent"][0]["step"], 3);
  EXPECT_EQ(report(0, op("all_reduce", "dp", -1, -1, -1, {0, 1}), 101.0)["waiting"]["step"], 0);
}

TEST(HangReport, WhereARankIsNamesItsOpOrTheStepsEnd) {
  // In B of micro-batch 3 on its chunk 1, and in the step's end (the tied copies' exchange):
  // no micro-batch there, so none is named.
  flight::Snapshot in_op;
  in_op.step = 2, in_op.phase = "B", in_op.micro = 3, in_op.chunk = 1;
  flight::Snapshot at_end;
  at_end.step = 2, at_end.phase = "after its ops";
  for (flight::Snapshot* s : {&in_op, &at_end}) {
    s->waiting = true;
    s->wait = op("recv", "pp", 1, 9, 2);
    s->wait_since = 100.0;
    s->phase_since = 95.0;
  }
  const auto report_of = [](int rank, const flight::Snapshot& s) {
    return rank_report(RankIdentity{rank, "n0" + std::to_string(rank), 0, rank, 0}, s, 110.0,
                       "hang 1", 110.0);
  };
  const auto a = analyse_hang({report_of(0, in_op), report_of(1, at_end)}, 2);
  EXPECT_NE(a.text.find("in step 3 (B micro-batch 3, chunk 1)"), std::string::npos) << a.text;
  EXPECT_NE(a.text.find("in step 3 (after its ops)"), std::string::npos) << a.text;
  EXPECT_EQ(a.text.find("after its ops micro-batch"), std::string::npos) << a.text;
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

TEST(HangReport, ADroppedSendGoneFromTheRingIsStillFound) {
  // Rank 0 dropped its send early in the step, then did more than a ring's worth of operations.
  flight::Record dropped = op("send", "pp", 1, 7, 2);
  dropped.skipped = true;
  const std::vector<flight::Record> busy(flight::ring_size, op("all_reduce", "tp", -1, -1, 2));
  const auto a = analyse_hang({report(0, op("recv", "pp", 1, 9, 2), 101.0, busy, {dropped}),
                               report(1, op("recv", "pp", 0, 7, 2), 103.0)},
                              2);
  EXPECT_EQ(a.culprit, 0);
  EXPECT_NE(a.why.find("rank 0 skipped its send"), std::string::npos) << a.why;
}

TEST(HangReport, AFullRingDoesNotClaimASendWasNeverPosted) {
  const std::vector<flight::Record> busy(flight::ring_size, op("all_reduce", "tp", -1, -1, 2));
  const auto a = analyse_hang({report(0, op("recv", "pp", 1, 9, 2), 105.0, busy),
                               report(1, op("recv", "pp", 0, 7, 2), 101.0)},
                              2);
  EXPECT_EQ(a.culprit, 0);
  EXPECT_EQ(a.why.find("has not posted"), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("rank 0's last 64 operations hold no send to rank 1"), std::string::npos)
      << a.why;
}

// The validation's forward-only schedule tags its messages as training's forwards, under the
// same step: a training send is not the one a validation receive waits for.
flight::Record in_phase(flight::Record r, const char* phase) {
  r.phase = phase;
  return r;
}

// Both ranks in a validation of (0-based) step 2: rank 0 waits for rank 1 with `recent` behind
// it, rank 1 for rank 0's send with tag 7.
HangAnalysis validation_hang(const std::vector<flight::Record>& recent) {
  return analyse_hang(
      {report(0, in_phase(op("recv", "pp", 1, 9, 2), "validation F"), 105.0, recent),
       report(1, in_phase(op("recv", "pp", 0, 7, 2), "validation"), 101.0)},
      2);
}

TEST(HangReport, ATrainingSendDoesNotAnswerAValidationReceive) {
  const flight::Record trained = in_phase(op("send", "pp", 1, 7, 2), "F");
  const auto a = validation_hang({trained});
  EXPECT_EQ(a.culprit, 0);
  EXPECT_NE(a.why.find("rank 0 has not posted the send to rank 1 with tag 7 of step 3's "
                       "validation"),
            std::string::npos)
      << a.why;
  // The validation's own send does answer it.
  const auto b = validation_hang({trained, in_phase(op("send", "pp", 1, 7, 2), "validation F")});
  EXPECT_EQ(b.why.find("has not posted the send to rank 1"), std::string::npos) << b.why;
}

TEST(HangReport, ARingOfTheStepsTrainingOpsCoversItsValidation) {
  // A ring full of this step's training ops began before its validation: a validation send
  // missing from it was never posted.
  const std::vector<flight::Record> busy(flight::ring_size,
                                         in_phase(op("send", "pp", 1, 7, 2), "F"));
  const auto a = validation_hang(busy);
  EXPECT_EQ(a.culprit, 0);
  EXPECT_NE(a.why.find("rank 0 has not posted the send to rank 1 with tag 7 of step 3's "
                       "validation"),
            std::string::npos)
      << a.why;
}

TEST(HangReport, TheFirstToDetectLeads) {
  std::vector<json> all{report(0, none, 0.0), report(1, none, 0.0), report(2, none, 0.0)};
  all[0]["detected_at"] = -1.0; // answered a request, did not detect
  all[1]["detected_at"] = 200.0;
  all[2]["detected_at"] = 150.0; // detected first although its rank is higher
  EXPECT_EQ(hang_leader(all), 2);
  all[1]["detected_at"] = 150.0;
  EXPECT_EQ(hang_leader(all), 1); // a tie goes to the lower rank
  all[1]["detected_at"] = all[2]["detected_at"] = -1.0;
  EXPECT_EQ(hang_leader(all), -1);
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

TEST(FlightRecorder, AWaitOnAnOperationPostedLongAgoIsSeen) {
  // The pipeline posts its receives when a step begins and waits on them much later: a ring's
  // worth of operations in between must not hide the wait.
  flight::reset();
  MpiComm self(borrow_comm(MPI_COMM_SELF), "world");
  std::vector<float> data(4, 1.0f);
  flight::Record early;
  early.op = "recv";
  early.axis = "pp";
  const std::uint64_t seq = flight::posted(early, false);
  for (std::size_t i = 0; i < 2 * flight::ring_size; ++i)
    self.all_reduce(Span<float>(data));
  flight::Snapshot s = flight::snapshot();
  ASSERT_EQ(s.earlier.size(), 1u);
  EXPECT_STREQ(s.earlier[0].op, "recv");
  flight::wait_begins(seq);
  s = flight::snapshot();
  ASSERT_TRUE(s.waiting);
  EXPECT_STREQ(s.wait.op, "recv");
  flight::completed(seq);
  s = flight::snapshot();
  EXPECT_FALSE(s.waiting);
  EXPECT_TRUE(s.earlier.empty());
}

// A pipeline of many micro-batches posts thousands of receives when a step begins (two per
// micro-batch and chunk); a wait on the first of them, the one a hang stops at, is seen with its
// record (it was lost past 256 in flight, and the hang went unnoticed).
TEST(FlightRecorder, AWaitOnTheFirstOfThousandsOfReceivesIsSeen) {
  flight::reset();
  std::vector<std::uint64_t> seqs;
  for (int i = 0; i < 5000; ++i) {
    flight::Record r;
    r.op = "recv";
    r.axis = "pp";
    r.peer = 1;
    r.tag = i;
    seqs.push_back(flight::posted(r, false));
  }
  EXPECT_EQ(flight::snapshot().earlier.size(), 5000u - flight::ring_size);
  flight::wait_begins(seqs.front());
  flight::Snapshot s = flight::snapshot();
  ASSERT_TRUE(s.waiting);
  EXPECT_STREQ(s.wait.op, "recv");
  EXPECT_EQ(s.wait.tag, 0);
  for (std::uint64_t seq : seqs)
    flight::completed(seq);
  s = flight::snapshot();
  EXPECT_FALSE(s.waiting);
  EXPECT_TRUE(s.earlier.empty());
}

// An agreement on errors, recorded with its communicator's members, names the rank that never
// came to it (it was "no rank waits for another that the reports name").
TEST(FlightRecorder, ABlockingScopeWithItsMembersNamesTheRankThatNeverCame) {
  flight::reset();
  std::vector<json> reports;
  {
    const flight::BlockingScope agreement(
        "all_reduce (error agreement)", "comm", 4,
        std::make_shared<const std::vector<int>>(std::vector<int>{0, 1}));
    reports.push_back(rank_report({1, "b", 0, 1, 0}, flight::snapshot(), -1.0, "", 10.0));
  }
  flight::reset();
  reports.insert(reports.begin(),
                 rank_report({0, "a", 0, 0, 0}, flight::snapshot(), -1.0, "", 10.0));
  const HangAnalysis a = analyse_hang(reports, 2);
  EXPECT_EQ(a.culprit, 0) << a.text;
}

// Two runs writing to one output directory: a watchdog answers its own run's requests only (it
// answered any, and another run's hang conclusion read its report).
TEST(Watchdog, AnswersOnlyItsOwnRunsRequests) {
  namespace fs = std::filesystem;
  flight::reset();
  const fs::path dir =
      fs::temp_directory_path() / ("gridlm-watchdog-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "hang");
  const fs::path mine = dir / "hang" / "rank-0.json";
  const auto ask = [&](const std::string& id) {
    std::ofstream(dir / "hang" / "request.tmp") << id << "\n";
    fs::rename(dir / "hang" / "request.tmp", dir / "hang" / "request");
  };
  const auto answered = [&](double seconds) {
    for (int i = 0; i < int(seconds / 0.02) && !fs::exists(mine); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return fs::exists(mine);
  };
  {
    WatchdogOptions o;
    o.timeout_seconds = 60.0; // polls every second: no hang in this test
    o.dir = dir.string();
    o.run = "run-a";
    const Watchdog watchdog(o);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ask("dump run-b 1 5.0");
    EXPECT_FALSE(answered(2.5)) << "answered another run's request";
    ask("dump run-a 1 6.0");
    ASSERT_TRUE(answered(2.5)) << "did not answer its own run's request";
  }
  std::ifstream f(mine);
  const json j = json::parse(f);
  EXPECT_EQ(j["request"], "dump run-a 1 6.0");
  fs::remove_all(dir);
}

TEST(FlightRecorder, BeforeTheFirstStepTheTimeInPhaseIsSmall) {
  flight::reset();
  const flight::Snapshot s = flight::snapshot();
  EXPECT_LT(flight::wall_seconds() - s.phase_since, 60.0);
}

} // namespace
} // namespace gridlm::parallel
