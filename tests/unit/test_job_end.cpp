// A job's last moments: a watchdog answers what was asked of it while the run went on, even when
// the run ends before its next poll, and a fatal error can tell when the launcher has read the
// rank's output (abort_job waits for that before MPI_Abort ends every rank).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>

#include "parallel/diagnostics.hpp"
#include "parallel/watchdog.hpp"

namespace gridlm::parallel {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("gridlm-job-end-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "hang");
  return dir;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::ostringstream text;
  text << f.rdbuf();
  return text.str();
}

// Polls once a second (timeout_seconds / 10), so a run that ends at once ends before any poll.
WatchdogOptions slow_polling(const fs::path& dir) {
  WatchdogOptions o;
  o.timeout_seconds = 10.0;
  o.dir = dir.string();
  o.world_size = 2;
  o.host = "test";
  o.run = "r1";
  return o;
}

TEST(Watchdog, ARequestMadeJustBeforeTheRunEndsIsAnswered) {
  const fs::path dir = fresh_dir("request");
  {
    const Watchdog watchdog(slow_polling(dir));
    // File times are coarser than the watchdog's clock: a request written in the same tick as
    // its start could look older than the run.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ofstream(dir / "hang" / "request") << "dump r1 1 123.000000\n";
  }
  ASSERT_TRUE(fs::exists(dir / "hang" / "rank-0.json"))
      << "the run ended before the watchdog's poll and the request went unanswered";
  EXPECT_NE(read_text(dir / "hang" / "rank-0.json").find("dump r1 1 123.000000"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Watchdog, ASigquitJustBeforeTheRunEndsIsReported) {
  const fs::path dir = fresh_dir("sigquit");
  WatchdogOptions o = slow_polling(dir);
  o.timeout_seconds = 5.0; // a poll each 0.5 s; the dump waits 2 s for other ranks' reports
  o.run = "a host-1";      // a host's name may hold a space: its own report is still read
  {
    const Watchdog watchdog(o);
    ASSERT_EQ(std::raise(SIGQUIT), 0);
  }
  ASSERT_TRUE(fs::exists(dir / "hang" / "report.txt"));
  const std::string report = read_text(dir / "hang" / "report.txt");
  EXPECT_NE(report.find("SIGQUIT on rank 0"), std::string::npos) << report;
  EXPECT_NE(report.find("state: rank 0"), std::string::npos) << report;
  EXPECT_TRUE(fs::exists(dir / "hang" / "rank-0.json"));
  fs::remove_all(dir);
}

TEST(OutputDrained, WaitsUntilThePipesReaderHasTakenEverything) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "last words\n", 11), 11);
  EXPECT_FALSE(output_drained(fds[1], 0.05)) << "nobody read the pipe, yet it counts as drained";
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    char buf[16];
    EXPECT_EQ(read(fds[0], buf, sizeof buf), 11);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(output_drained(fds[1], 5.0));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  reader.join();
  close(fds[0]);
  close(fds[1]);
}

TEST(OutputDrained, AFileIsDrainedAtOnce) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_GE(std::fputs("text", f), 0);
  std::fflush(f);
  EXPECT_TRUE(output_drained(fileno(f), 0.0));
  std::fclose(f);
}

} // namespace
} // namespace gridlm::parallel
