// The watchdog's reports and its reasoning about who hangs (hang_report.hpp).
#include "parallel/hang_report.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace gridlm::parallel {
namespace {

using nlohmann::json;

json record_json(const flight::Record& r) {
  json j{{"seq", r.seq},        {"op", r.op},         {"axis", r.axis},
         {"peer", r.peer},      {"bytes", r.bytes},   {"tag", r.tag},
         {"step", r.step + 1},  {"phase", r.phase},   {"micro", r.micro},
         {"chunk", r.chunk},    {"posted", r.posted}, {"completed", r.completed},
         {"skipped", r.skipped}};
  j["members"] = r.members ? *r.members : std::vector<int>{};
  return j;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

bool point_to_point(const json& op) { return op["op"] == "send" || op["op"] == "recv"; }

// "recv from rank 0 on pp (16.0 KiB, tag 3)"
std::string op_text(const json& op) {
  const std::string name = op["op"];
  std::string peer;
  if (point_to_point(op)) {
    peer = fmt::format(" {} rank {}", name == "send" ? "to" : "from", op["peer"].get<int>());
  } else if (name == "broadcast") {
    peer = fmt::format(" from root rank {}", op["peer"].get<int>());
  }
  const std::string tag =
      op["tag"].get<int>() >= 0 ? fmt::format(", tag {}", op["tag"].get<int>()) : std::string();
  return fmt::format("{}{} on {} ({}{})", name, peer, op["axis"].get<std::string>(),
                     size_text(op["bytes"].get<std::size_t>()), tag);
}

// ", in step 4 (F micro-batch 0, chunk 0)", ", in step 4 (after its ops)"; the reports count
// steps from 1, as the log does (0: before the first step).
std::string where_text(const json& r) {
  const int step = r["step"];
  const std::string phase = r["phase"];
  if (step <= 0) return phase.empty() ? ", before the first step" : ", " + phase;
  if (phase.empty()) return fmt::format(", in step {}", step);
  if (r["micro"].get<int>() < 0) return fmt::format(", in step {} ({})", step, phase);
  return fmt::format(", in step {} ({} micro-batch {}, chunk {})", step, phase,
                     r["micro"].get<int>(), r["chunk"].get<int>());
}

// Whether an operation belongs to a step's validation rather than to its training ops: the
// validation's forward-only schedule numbers its messages as training's forwards do, under the
// same step, so a training send must not pass for the send a validation receive waits for.
bool validating(const json& op) {
  return op["phase"].get<std::string>().rfind("validation", 0) == 0;
}

// The send that would complete `wait` (a recv by `waiter`) among the peer's recorded operations.
const json* matching_send(const json& peer_report, const json& wait, int waiter) {
  for (const char* list : {"recent", "earlier"}) {
    if (!peer_report.contains(list)) continue;
    for (const json& op : peer_report[list]) {
      if (op["op"] == "send" && op["peer"] == waiter && op["tag"] == wait["tag"] &&
          op["step"] == wait["step"] && validating(op) == validating(wait))
        return &op;
    }
  }
  return nullptr;
}

// Whether the peer's ring reaches back before the part of the step that `wait` is in (its
// training ops, or its validation, which follows them), so that a send missing from it was
// never posted (rather than completed and overwritten).
bool ring_covers(const json& peer_report, const json& wait) {
  const json& recent = peer_report["recent"];
  if (recent.size() < flight::ring_size) return true;
  const json& oldest = recent.front();
  return oldest["step"] < wait["step"] ||
         (oldest["step"] == wait["step"] && validating(wait) && !validating(oldest));
}

// "step 4", "step 4's validation"
std::string step_text(const json& op) {
  return fmt::format("step {}{}", op["step"].get<int>(), validating(op) ? "'s validation" : "");
}

std::string who_text(const json& r) {
  return fmt::format("rank {} (dp {}, pp {}, tp {}) on {}", r["rank"].get<int>(),
                     r["dp"].get<int>(), r["pp"].get<int>(), r["tp"].get<int>(),
                     r["host"].get<std::string>());
}

} // namespace

json rank_report(const RankIdentity& who, const flight::Snapshot& s, double detected_at,
                 const std::string& request, double now) {
  json j{{"rank", who.rank},
         {"host", who.host},
         {"dp", who.dp},
         {"pp", who.pp},
         {"tp", who.tp},
         {"detected", detected_at >= 0.0},
         {"detected_at", detected_at},
         {"request", request},
         {"now", now},
         {"step", s.step + 1}, // from 1, as the log counts steps
         {"phase", s.phase},
         {"micro", s.micro},
         {"chunk", s.chunk},
         {"phase_since", s.phase_since}};
  j["waiting"] = s.waiting ? record_json(s.wait) : json(nullptr);
  j["wait_since"] = s.waiting ? s.wait_since : 0.0;
  j["recent"] = json::array();
  for (const flight::Record& r : s.recent)
    j["recent"].push_back(record_json(r));
  j["earlier"] = json::array();
  for (const flight::Record& r : s.earlier)
    j["earlier"].push_back(record_json(r));
  return j;
}

std::string describe_rank(const json& r) {
  const double now = r["now"];
  if (!r["waiting"].is_null()) {
    const json& w = r["waiting"];
    return fmt::format("{}: waiting {:.1f} s in {}{}", who_text(r),
                       now - r["wait_since"].get<double>(), op_text(w), where_text(r));
  }
  std::string last = "none";
  if (!r["recent"].empty()) {
    const json& op = r["recent"].back();
    last = op_text(op) + (op["skipped"].get<bool>()           ? ", SKIPPED by fault injection"
                          : op["completed"].get<double>() < 0 ? ", in flight"
                                                              : ", done");
  }
  return fmt::format("{}: not in a communication operation (computing, or stuck outside "
                     "communication) for {:.1f} s{}; its last operation: {}",
                     who_text(r), now - r["phase_since"].get<double>(), where_text(r), last);
}

namespace {

using ByRank = std::map<int, const json*>;

// For every rank that others wait for, who waits: the peer of a point-to-point wait, or the
// members of a collective's communicator that are not waiting in the same collective.
std::map<int, std::set<int>> waiters_of(const ByRank& by_rank) {
  std::map<int, std::set<int>> out;
  for (const auto& [rank, r] : by_rank) {
    const json& w = (*r)["waiting"];
    if (w.is_null()) continue;
    if (point_to_point(w)) {
      out[w["peer"].get<int>()].insert(rank);
      continue;
    }
    for (int m : w["members"].get<std::vector<int>>()) {
      if (m == rank) continue;
      auto it = by_rank.find(m);
      const bool same = it != by_rank.end() && !(*it->second)["waiting"].is_null() &&
                        (*it->second)["waiting"]["op"] == w["op"] &&
                        (*it->second)["waiting"]["axis"] == w["axis"];
      if (!same) out[m].insert(rank);
    }
  }
  return out;
}

// What the senders' records say about the receives waited on: a send never posted, or one
// dropped by fault injection (then `dropped` holds the sender).
std::map<int, std::string> send_evidence(const ByRank& by_rank, std::set<int>& dropped) {
  std::map<int, std::string> out;
  for (const auto& [rank, r] : by_rank) {
    const json& w = (*r)["waiting"];
    if (w.is_null() || w["op"] != "recv") continue;
    const int peer = w["peer"];
    auto it = by_rank.find(peer);
    if (it == by_rank.end()) continue;
    const json* send = matching_send(*it->second, w, rank);
    const int tag = w["tag"];
    const std::string step = step_text(w);
    if (send == nullptr && ring_covers(*it->second, w)) {
      out.emplace(peer, fmt::format("rank {} has not posted the send to rank {} with tag {} of {}",
                                    peer, rank, tag, step));
    } else if (send == nullptr) {
      out.emplace(peer, fmt::format("rank {}'s last {} operations hold no send to rank {} with "
                                    "tag {} of {}",
                                    peer, flight::ring_size, rank, tag, step));
    } else if ((*send)["skipped"].get<bool>()) {
      out[peer] = fmt::format("rank {} skipped its send to rank {} with tag {} of {} (fault "
                              "injection)",
                              peer, rank, tag, step);
      dropped.insert(peer);
    }
  }
  return out;
}

} // namespace

int hang_leader(const std::vector<json>& reports) {
  int leader = -1;
  double first = 0.0;
  for (const json& r : reports) {
    const double at = r.value("detected_at", -1.0);
    const int rank = r["rank"];
    if (at < 0.0) continue;
    if (leader < 0 || at < first || (at == first && rank < leader)) {
      leader = rank;
      first = at;
    }
  }
  return leader;
}

HangAnalysis analyse_hang(const std::vector<json>& reports, int world_size) {
  ByRank by_rank;
  for (const json& r : reports)
    by_rank[r["rank"].get<int>()] = &r;
  HangAnalysis a;
  for (const auto& [rank, r] : by_rank)
    a.text += "hang: " + describe_rank(*r) + "\n";
  for (int rank = 0; rank < world_size; ++rank) {
    if (by_rank.count(rank) == 0)
      a.text += fmt::format("hang: rank {} wrote no report (it died, or cannot run its "
                            "watchdog)\n",
                            rank);
  }
  const std::map<int, std::set<int>> waiters = waiters_of(by_rank);
  std::set<int> dropped;
  const std::map<int, std::string> evidence = send_evidence(by_rank, dropped);
  // The culprit: a rank others wait for that dropped the matching send, is absent, or is not
  // waiting itself (computing); else the one whose own wait began last (the others were stuck
  // before it stopped serving them); then the one most ranks wait for.
  auto key = [&](int rank) {
    auto it = by_rank.find(rank);
    const std::size_t n = waiters.at(rank).size();
    if (dropped.count(rank) != 0) return std::make_tuple(0, 0.0, n);
    if (it == by_rank.end()) return std::make_tuple(1, 0.0, n);
    if ((*it->second)["waiting"].is_null()) return std::make_tuple(2, 0.0, n);
    return std::make_tuple(3, -(*it->second)["wait_since"].get<double>(), n);
  };
  auto better = [&](int x, int y) {
    const auto kx = key(x), ky = key(y);
    if (std::get<0>(kx) != std::get<0>(ky)) return std::get<0>(kx) < std::get<0>(ky);
    if (std::get<1>(kx) != std::get<1>(ky)) return std::get<1>(kx) < std::get<1>(ky);
    return std::get<2>(kx) > std::get<2>(ky);
  };
  for (const auto& entry : waiters)
    if (a.culprit < 0 || better(entry.first, a.culprit)) a.culprit = entry.first;
  if (a.culprit < 0) {
    a.why = "no rank waits for another that the reports name";
  } else {
    const std::set<int>& who = waiters.at(a.culprit);
    std::string list;
    for (int w : who)
      list += (list.empty() ? "" : ", ") + std::to_string(w);
    auto it = by_rank.find(a.culprit);
    const std::string state = it == by_rank.end()
                                  ? fmt::format("rank {} wrote no report", a.culprit)
                                  : describe_rank(*it->second);
    const bool many = who.size() > 1;
    a.why = fmt::format("rank {}: rank{} {} wait{} for it; {}", a.culprit, many ? "s" : "", list,
                        many ? "" : "s", state);
    if (auto ev = evidence.find(a.culprit); ev != evidence.end()) a.why += "; " + ev->second;
  }
  a.text += "hang: likely culprit: " + a.why + "\n";
  return a;
}

} // namespace gridlm::parallel
