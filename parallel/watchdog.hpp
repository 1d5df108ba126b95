// The hang watchdog: a thread that never calls MPI and watches the flight recorder. When this
// rank has waited in one communication or HDF5 operation for parallel.timeout_seconds, it writes
// what it knows to <dir>/hang/rank-<r>.json, asks every other rank's watchdog (through a file in
// the same, shared directory) to write theirs, reads them, names the likely culprit (the rank
// the others wait for), prints that to stderr and to <dir>/hang/report.txt, and ends the
// process with exit_hung; every other rank's watchdog, having answered, ends its process with
// exit_hung too (the stuck one included: its watchdog is a thread of its own), so that the
// launcher reports the job's status as 76 rather than its kill signal. Requests and reports
// carry the run's id: another run writing to the same directory is not answered, nor read.
// While a watchdog runs, SIGQUIT asks for the same reports without stopping (written to
// <dir>/hang/ too).
#pragma once

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <string>
#include <thread>

namespace gridlm::parallel {

// The exit status of a job that the watchdog ended (jobscripts/README.md): EX_PROTOCOL of
// sysexits.h, since a peer broke the protocol of the operation.
constexpr int exit_hung = 76;

struct WatchdogOptions {
  double timeout_seconds = 600.0; // a wait this long in one operation is a hang (0: no watchdog)
  std::string dir;                // output directory, shared by the ranks; reports in dir/hang
  int rank = 0;                   // world rank
  int world_size = 1;
  std::string host;
  int dp = 0, pp = 0, tp = 0; // grid coordinates
  std::string run;            // the same on every rank of the run, unlike any other run's
  // Where a rank that detects a hang writes "76 <why>" ("": nowhere), for a job script: the
  // launcher reports the status of the ranks it killed (srun: 128 + 9), not 76
  // (GRIDLM_STATUS_FILE, which jobscripts/train.sbatch sets).
  std::string status_file;
  // The setting that gave timeout_seconds, as the report names it ("": a training run's
  // parallel.timeout_seconds, with its advice to resume from the newest checkpoint; else the
  // advice is to run the same command again).
  std::string setting;
};

class Watchdog {
public:
  explicit Watchdog(WatchdogOptions options);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

private:
  // dumps_seen: SIGQUITs counted before this watchdog started.
  void loop(int dumps_seen);

  WatchdogOptions options_;
  double started_ = 0.0; // wall-clock seconds: files older than this are a previous run's
  void (*previous_quit_)(int) = SIG_DFL; // the SIGQUIT handler to put back
  // The destructor wakes the loop out of its poll at once: a run must not end up to a poll
  // (1 s) late.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace gridlm::parallel
