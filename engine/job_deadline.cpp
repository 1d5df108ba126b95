// Reading the job's end from Slurm.
#include "engine/job_deadline.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return s.substr(b, e - b);
}

// The output of a command (its first line), or nullopt when it cannot run or fails.
std::optional<std::string> first_line_of(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::array<char, 256> line{};
  const bool got = std::fgets(line.data(), int(line.size()), pipe) != nullptr;
  const int status = pclose(pipe);
  if (!got || status != 0) return std::nullopt;
  return trim(line.data());
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

} // namespace

std::optional<double> parse_slurm_duration(const std::string& raw) {
  const std::string text = trim(raw);
  if (text == "UNLIMITED" || text == "NOT_SET" || text == "INVALID" || text == "Partition_Limit")
    return std::nullopt;
  auto bad = [&] {
    return Error(fmt::format("cannot read Slurm's time left '{}' (expected "
                             "[days-][hours:]minutes:seconds); give the job's end instead, in "
                             "seconds since the epoch: export SLURM_JOB_END_TIME=$(date -d "
                             "'END' +%s)",
                             raw));
  };
  std::string rest = text;
  double days = 0.0;
  if (const std::size_t dash = rest.find('-'); dash != std::string::npos) {
    if (!all_digits(rest.substr(0, dash))) throw bad();
    days = std::atof(rest.substr(0, dash).c_str());
    rest = rest.substr(dash + 1);
  }
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t colon; (colon = rest.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(rest.substr(start, colon - start));
  parts.push_back(rest.substr(start));
  if (parts.size() < 2 || parts.size() > 3) throw bad();
  double seconds = 0.0;
  for (const std::string& p : parts) {
    if (!all_digits(p)) throw bad();
    seconds = seconds * 60.0 + std::atof(p.c_str());
  }
  return days * 86400.0 + seconds;
}

std::optional<JobDeadline> read_job_deadline(bool live, double wait_seconds) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return std::nullopt;
  if (const char* end = std::getenv("SLURM_JOB_END_TIME");
      !live && end != nullptr && all_digits(end)) {
    const double left = std::atof(end) - double(std::time(nullptr));
    const char* start = std::getenv("SLURM_JOB_START_TIME");
    const double limit =
        start != nullptr && all_digits(start) ? std::atof(end) - std::atof(start) : 0.0;
    return JobDeadline{left, "SLURM_JOB_END_TIME", limit};
  }
  if (!all_digits(job)) return std::nullopt;
  // The other ranks wait for this answer, at start-up too: a slurmctld that does not reply
  // must not hold them past the watchdog's patience (where `timeout` is missing, a live question
  // is not asked and the end known before stands; the start-up one is asked unbounded).
  const std::string query = fmt::format("squeue -h -j {} -o \"%L %l\" 2>/dev/null", job);
  const std::optional<std::string> line = first_line_of(fmt::format(
      "if command -v timeout >/dev/null 2>&1; then timeout {:.0f} {}; elif {}; then :; else {}; "
      "fi",
      std::max(1.0, std::ceil(wait_seconds)), query, live ? "true" : "false", query));
  if (!line) return std::nullopt; // no squeue here: the signals still stop the run
  const std::size_t space = line->find(' ');
  const std::string source = fmt::format("squeue -j {} -o %L", job);
  // A limit lifted while the job runs (scontrol update TimeLimit=UNLIMITED): no end any more.
  if (live && line->substr(0, space) == "UNLIMITED")
    return JobDeadline{std::numeric_limits<double>::infinity(), source, 0.0};
  const std::optional<double> seconds = parse_slurm_duration(line->substr(0, space));
  if (!seconds) return std::nullopt;
  std::optional<double> limit;
  if (space != std::string::npos) limit = parse_slurm_duration(line->substr(space + 1));
  return JobDeadline{*seconds, source, limit.value_or(0.0)};
}

} // namespace gridlm::engine
