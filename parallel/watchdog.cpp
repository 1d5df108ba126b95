// The hang watchdog's thread (watchdog.hpp). It talks to the other ranks' watchdogs only
// through files in the shared output directory, since a hung job's MPI cannot be trusted and
// MPI may not be called from this thread: <dir>/hang/request (a newer one asks every rank for
// its report), <dir>/hang/rank-<r>.json (the reports), <dir>/hang/report.txt (the conclusion,
// or a SIGQUIT's states), <dir>/hang/concluded (the run whose hang report.txt concludes).
#include "parallel/watchdog.hpp"

#include <algorithm>
#include <cctype>
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

// The setting that gave the timeout, as the messages name it.
std::string setting_name(const WatchdogOptions& options) {
  return options.setting.empty() ? "parallel.timeout_seconds" : options.setting;
}

namespace fs = std::filesystem;
using nlohmann::json;

// Lock-free, so safe to touch in a signal handler.
std::atomic<int> dump_requests{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_dump_signal(int) { dump_requests.fetch_add(1); }

// Seconds since the epoch of the file's last change; -1 when it does not exist.
double mtime(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return -1.0;
  return double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::ostringstream text;
  text << f.rdbuf();
  return text.str();
}

// A request's id: "hang RUN RANK TIME" or "dump RUN RANK TIME". Whether it is `run`'s.
bool of_run(const std::string& id, const std::string& run) {
  std::istringstream words(id);
  std::string kind, its;
  words >> kind >> its;
  return its == run;
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

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

} // namespace

Watchdog::Watchdog(WatchdogOptions options) : options_(std::move(options)) {
  // One word in the requests' "KIND RUN RANK TIME", whatever the host's name holds.
  for (char& c : options_.run)
    if (std::isspace(static_cast<unsigned char>(c))) c = '_';
  if (options_.run.empty()) options_.run = "-";
  started_ = flight::wall_seconds();
  if (options_.timeout_seconds <= 0) return;
  // Only while a watchdog can answer: otherwise SIGQUIT keeps its default meaning.
  // Counted here, not in the thread: a SIGQUIT before the thread first runs is still new to it.
  const int dumps_seen = dump_requests.load();
  previous_quit_ = std::signal(SIGQUIT, on_dump_signal);
  if (previous_quit_ == SIG_ERR) previous_quit_ = SIG_DFL;
  thread_ = std::thread([this, dumps_seen] { loop(dumps_seen); });
}

Watchdog::~Watchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  thread_.join();
  std::signal(SIGQUIT, previous_quit_);
}

namespace {

// What one watchdog knows and does; the loop below decides when.
struct Reporter {
  const WatchdogOptions& options;
  double started;
  double poll, grace;
  fs::path dir, request, mine;

  json report(double detected_at, const std::string& answering) const {
    const RankIdentity who{options.rank, options.host, options.dp, options.pp, options.tp};
    json j = rank_report(who, flight::snapshot(), detected_at, answering, flight::wall_seconds());
    // A record's axis may be a file's path, which need not be UTF-8: such bytes are replaced
    // rather than ending the report with nlohmann's error.
    write_file(mine, j.dump(1, ' ', false, json::error_handler_t::replace));
    return j;
  }

  // Every rank's report written since `since`, after the others had `grace` to answer.
  std::vector<json> gather(double since) const {
    sleep_seconds(grace);
    std::vector<json> all;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".json") continue;
      if (mtime(e.path()) < since) continue;
      std::ifstream f(e.path());
      json j = json::parse(f, nullptr, false);
      if (j.is_discarded() || !j.contains("rank") || !j.contains("request")) continue;
      if (!j["request"].is_string() || !of_run(j["request"], options.run)) continue;
      all.push_back(std::move(j));
    }
    std::sort(all.begin(), all.end(),
              [](const json& a, const json& b) { return a["rank"] < b["rank"]; });
    return all;
  }

  // This rank hangs: it says so at once (the shared file system may be what hangs), every rank
  // reports, the first to detect concludes, the process ends, whatever else blocks.
  [[noreturn]] void hang() const {
    const double detected_at = flight::wall_seconds();
    const RankIdentity who{options.rank, options.host, options.dp, options.pp, options.tp};
    print("gridlm: hang: " +
          describe_rank(rank_report(who, flight::snapshot(), detected_at, "", detected_at)) + "\n");
    const double deadline = 2.0 * grace + 10.0;
    std::thread([this, deadline] {
      sleep_seconds(deadline);
      print(fmt::format("gridlm: hang: rank {} could not gather the ranks' reports in {:g} s "
                        "(is {} on a file system that hangs?); ending the job (exit status {})\n",
                        options.rank, deadline, dir.string(), exit_hung));
      std::_Exit(exit_hung);
    }).detach();
    if (!options.status_file.empty()) {
      write_file(options.status_file,
                 fmt::format("{} hang: a rank waited more than {} = {:g} s in one operation; see "
                             "{}/report.txt\n",
                             exit_hung, setting_name(options), options.timeout_seconds,
                             dir.string()));
    }
    const std::string id = fmt::format("hang {} {} {:.6f}", options.run, options.rank, detected_at);
    report(detected_at, id);
    write_file(request, id + "\n");
    const double asked = mtime(request);
    const std::vector<json> all = gather(std::max(started, asked - 2.0 * grace));
    const int leader = hang_leader(all);
    if (leader == options.rank || leader < 0) {
      const HangAnalysis a = analyse_hang(all, options.world_size);
      const std::string head = fmt::format(
          "gridlm: hang: rank {} waited more than {} = {:g} s in one operation; every rank's "
          "recent operations are in {}/rank-*.json\n",
          options.rank, setting_name(options), options.timeout_seconds, dir.string());
      // What to do next: the run goes on from its newest checkpoint, on other nodes when the
      // culprit's may be at fault.
      std::string host;
      for (const json& r : all)
        if (r["rank"] == a.culprit && r.contains("host")) host = r["host"];
      const std::string without =
          host.empty()
              ? ""
              : fmt::format(", without {} if it is at fault (sbatch --exclude={})", host, host);
      const std::string advice =
          options.setting.empty()
              ? "raise parallel.timeout_seconds if a wait this long is expected; else submit the "
                "job again with --resume auto to go on from the newest checkpoint"
              : "raise " + options.setting +
                    " if a wait this long is expected; else run the same command again";
      print(head + a.text + "gridlm: ending the job (exit status " + std::to_string(exit_hung) +
            "); " + advice + without + "\n");
      write_file(dir / "report.txt", head + a.text);
      write_file(dir / "concluded", options.run + "\n");
    }
    end_with_the_others(asked);
  }

  // Every rank ends with exit_hung at one moment: a poll and a half after the leader's
  // conclusion (by its file's time), when all have seen it; a rank ending before the others
  // would have the launcher kill them and report the signal as the job's status. Without a
  // conclusion in the time the leader is given, at once.
  [[noreturn]] void end_with_the_others(double asked) const {
    for (double waited = 0.0; waited < 2.0 * grace + 5.0; waited += poll) {
      // Not report.txt: a SIGQUIT's states, or another run's conclusion, are written there too.
      const double concluded = mtime(dir / "concluded");
      if (concluded >= asked && read_text(dir / "concluded") == options.run + "\n") {
        // By the file's time, bounded: a file server's clock may run ahead of this node's.
        const double wait = concluded + 1.5 * poll + 0.2 - flight::wall_seconds();
        sleep_seconds(std::clamp(wait, 0.0, 2.0 * poll + 0.5));
        break;
      }
      sleep_seconds(poll);
    }
    std::_Exit(exit_hung);
  }

  // SIGQUIT: every rank's state, and the run goes on. Returns the request's time.
  double dump() const {
    const std::string id =
        fmt::format("dump {} {} {:.6f}", options.run, options.rank, flight::wall_seconds());
    write_file(request, id + "\n");
    const double asked = mtime(request);
    report(-1.0, id);
    std::string text = fmt::format(
        "gridlm: SIGQUIT on rank {}: the state of every rank (the job goes on); reports in "
        "{}/rank-*.json\n",
        options.rank, dir.string());
    // Reports a grace before this request count too: when every rank is signalled at once
    // (scancel --signal=QUIT), the others wrote theirs for their own requests, just before this
    // one, and are in their own dumps, not answering it.
    for (const json& r : gather(asked - grace))
      text += "state: " + describe_rank(r) + "\n";
    print(text);
    write_file(dir / "report.txt", text);
    return asked;
  }
};

} // namespace

void Watchdog::loop(int dumps_seen) {
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
  // A request of this run newer than the last answered, and a SIGQUIT not yet acted on. A hang
  // request ends this process too, once the leader has concluded.
  const auto answer = [&] {
    try {
      if (const double asked = mtime(reporter.request); asked > answered) {
        answered = asked;
        std::string id = read_text(reporter.request);
        if (!id.empty() && id.back() == '\n') id.pop_back();
        if (of_run(id, options_.run)) {
          reporter.report(-1.0, id);
          if (id.rfind("hang ", 0) == 0) reporter.end_with_the_others(asked);
        }
      }
      if (const int dumps = dump_requests.load(); dumps != dumps_seen) {
        dumps_seen = dumps;
        answered = reporter.dump();
      }
    } catch (const std::exception& e) {
      // A report that cannot be written must not end a run that is not hung.
      print(fmt::format("gridlm: warning: rank {}'s watchdog could not write its report: {}\n",
                        options_.rank, e.what()));
    }
  };
  // Time stuck in one wait, counted on the steady clock and a poll at most per poll, so that
  // neither a clock step nor a suspended job (SIGSTOP, then SIGCONT) reads as a hang.
  double stuck = 0.0;
  std::uint64_t last_activity = 0;
  auto last_poll = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, std::chrono::duration<double>(poll),
                         [this] { return stop_.load(); })) {
        lock.unlock();
        // The run ends, maybe before the next poll: what was asked while it ran still gets its
        // answer (seen in CI: a SIGQUIT near the end of a run got one report of two).
        answer();
        break;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last_poll).count();
    last_poll = now;
    const flight::Snapshot s = flight::snapshot();
    stuck = s.waiting && s.activity == last_activity ? stuck + std::min(dt, 2.0 * poll) : 0.0;
    last_activity = s.activity;
    try {
      if (stuck > options_.timeout_seconds) reporter.hang();
    } catch (const std::exception& e) {
      print(fmt::format("gridlm: hang: rank {} waited more than {} = {:g} s in one operation, "
                        "and its watchdog failed: {}; ending the job (exit status {})\n",
                        options_.rank, setting_name(options_), options_.timeout_seconds, e.what(),
                        exit_hung));
      std::_Exit(exit_hung);
    }
    answer();
  }
}

} // namespace gridlm::parallel
