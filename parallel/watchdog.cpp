// The hang watchdog's thread (watchdog.hpp). It talks to the other ranks' watchdogs only
// through files in the shared output directory, since a hung job's MPI cannot be trusted and
// MPI may not be called from this thread: <dir>/hang/request (a newer one asks every rank for
// its report), <dir>/hang/rank-<r>.json (the reports), <dir>/hang/report.txt (the conclusion).
#include "parallel/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parallel/flight_recorder.hpp"
#include "parallel/hang_report.hpp"

namespace gridlm::parallel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

volatile std::sig_atomic_t dump_requests = 0;
extern "C" void on_dump_signal(int) { dump_requests = dump_requests + 1; }

// Seconds since the epoch of the file's last change; -1 when it does not exist.
double mtime(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return -1.0;
  return double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
}

// Written whole or not at all, so that a reader never sees half a report.
void write_file(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f.flush()) return;
  }
  fs::rename(tmp, p, ec);
}

// A whole write to stderr, bypassing stdio (the main thread may hold its lock).
void print(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += std::size_t(n);
  }
}

} // namespace

Watchdog::Watchdog(WatchdogOptions options) : options_(std::move(options)) {
  started_ = flight::wall_seconds();
  if (options_.timeout_seconds > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void install_dump_signal() { std::signal(SIGQUIT, on_dump_signal); }

namespace {

// What one watchdog knows and does; the loop below decides when.
struct Reporter {
  const WatchdogOptions& options;
  double started;
  double poll, grace;
  fs::path dir, request, mine;

  json report(bool detected) const {
    const RankIdentity who{options.rank, options.host, options.dp, options.pp, options.tp};
    json j = rank_report(who, flight::snapshot(), detected, flight::wall_seconds());
    write_file(mine, j.dump(1));
    return j;
  }

  // Every rank's report written since this run began, after the others had `grace` to answer.
  std::vector<json> gather() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
    while (std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::duration<double>(poll));
    std::vector<json> all;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".json") continue;
      if (mtime(e.path()) < started) continue;
      std::ifstream f(e.path());
      json j = json::parse(f, nullptr, false);
      if (!j.is_discarded() && j.contains("rank")) all.push_back(std::move(j));
    }
    std::sort(all.begin(), all.end(),
              [](const json& a, const json& b) { return a["rank"] < b["rank"]; });
    return all;
  }

  // This rank hangs: every rank reports, the lowest detecting rank concludes, the process ends.
  [[noreturn]] void hang() const {
    const json me = report(true);
    write_file(request, "hang\n");
    const std::vector<json> all = gather();
    int leader = options.rank;
    for (const json& r : all)
      if (r.value("detected", false)) leader = std::min(leader, r["rank"].get<int>());
    if (leader == options.rank) {
      const HangAnalysis a = analyse_hang(all, options.world_size);
      const std::string head = fmt::format(
          "gridlm: hang: rank {} waited more than parallel.timeout_seconds = {:g} s in one "
          "operation; every rank's recent operations are in {}/rank-*.json\n",
          options.rank, options.timeout_seconds, dir.string());
      write_file(dir / "report.txt", head + a.text);
      print(head + a.text + "gridlm: ending the job (exit status " + std::to_string(exit_hung) +
            "); raise parallel.timeout_seconds if a wait this long is expected\n");
    } else {
      print("gridlm: hang: " + describe_rank(me) + "\n");
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    std::_Exit(exit_hung);
  }

  // SIGQUIT: every rank's state, and the run goes on. Returns the request's time.
  double dump() const {
    report(false);
    write_file(request, "dump\n");
    const double asked = mtime(request);
    std::string text = fmt::format(
        "gridlm: SIGQUIT on rank {}: the state of every rank (the job goes on); reports in "
        "{}/rank-*.json\n",
        options.rank, dir.string());
    for (const json& r : gather())
      text += "state: " + describe_rank(r) + "\n";
    write_file(dir / "report.txt", text);
    print(text);
    return asked;
  }
};

} // namespace

void Watchdog::loop() {
  const double poll = std::clamp(options_.timeout_seconds / 10.0, 0.05, 1.0);
  const fs::path dir = fs::path(options_.dir) / "hang";
  const Reporter reporter{options_,
                          started_,
                          poll,
                          std::max(2.0, 4.0 * poll),
                          dir,
                          dir / "request",
                          dir / fmt::format("rank-{}.json", options_.rank)};
  double answered = started_;
  std::sig_atomic_t dumps_seen = dump_requests;
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
    const flight::Snapshot s = flight::snapshot();
    if (s.waiting && flight::wall_seconds() - s.wait_since > options_.timeout_seconds)
      reporter.hang();
    if (const double asked = mtime(reporter.request); asked > answered) {
      answered = asked;
      reporter.report(false);
    }
    if (dump_requests != dumps_seen) {
      dumps_seen = dump_requests;
      answered = reporter.dump();
    }
  }
}

} // namespace gridlm::parallel
