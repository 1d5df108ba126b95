// What the watchdog (watchdog.hpp) writes and concludes: one JSON report per rank from its
// flight recorder, a line of text per rank, and the likely culprit of a hang from all reports.
// Pure functions of their inputs, so that tests can feed them made-up reports.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/flight_recorder.hpp"

namespace gridlm::parallel {

struct RankIdentity {
  int rank = 0;
  std::string host;
  int dp = 0, pp = 0, tp = 0;
};

// {"rank", "host", "dp", "pp", "tp", "detected", "detected_at", "request", "now", "step",
//  "phase", "micro", "chunk", "phase_since", "waiting": {record} or null, "wait_since",
//  "recent": [{record}, ...], "earlier": [{record}, ...] (in flight or dropped, gone from the
//  ring)}. detected_at: wall-clock seconds when this rank found itself hung, < 0 when it did not;
// request: what the report answers (watchdog.cpp). Steps (the rank's and each record's) count
// from 1, as the log does; 0 is before the first step.
nlohmann::json rank_report(const RankIdentity& who, const flight::Snapshot& s, double detected_at,
                           const std::string& request, double now);

// "rank 1 (dp 0, pp 1, tp 0) on n01: waiting 12.0 s in recv from rank 0 on pp (16.0 KiB,
// tag 3), step 4, F micro-batch 0 chunk 0"
std::string describe_rank(const nlohmann::json& report);

// Which detecting rank concludes: the one that detected first (ties: the lower rank), so that
// a rank detecting later cannot take the lead from one that will end the job before it.
// -1 when no report says it detected.
int hang_leader(const std::vector<nlohmann::json>& reports);

struct HangAnalysis {
  int culprit = -1; // world rank, -1 when none can be named
  std::string why;  // one sentence: who waits for it and what it is doing
  std::string text; // every rank's line, then the culprit's line
};

// reports: those found (any order); world_size: the ranks there should be.
HangAnalysis analyse_hang(const std::vector<nlohmann::json>& reports, int world_size);

} // namespace gridlm::parallel
