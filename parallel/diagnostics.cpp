// Implementation of the rank/host/grid context used in every error message.
#include "parallel/diagnostics.hpp"

#include <mpi.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <linux/sockios.h>

#include <fmt/format.h>

namespace gridlm {
namespace {
// The live GridCoordinatesScopes, newest first; both constant-initialised, so where() works even
// during static initialisation. The mutex because where() may run on a background thread while
// the main thread makes or drops a grid.
std::mutex g_scopes_mutex;
GridCoordinatesScope* g_newest_scope = nullptr;

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}
} // namespace

GridCoordinatesScope::GridCoordinatesScope(int dp, int pp, int tp) : dp_(dp), pp_(pp), tp_(tp) {
  const std::lock_guard<std::mutex> lock(g_scopes_mutex);
  older_ = g_newest_scope;
  if (older_ != nullptr) older_->newer_ = this;
  g_newest_scope = this;
}

GridCoordinatesScope::~GridCoordinatesScope() {
  const std::lock_guard<std::mutex> lock(g_scopes_mutex);
  if (older_ != nullptr) older_->newer_ = newer_;
  if (newer_ != nullptr) {
    newer_->older_ = older_;
  } else {
    g_newest_scope = older_;
  }
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "unknown-host";
  return buf.data();
}

std::string grid_part() {
  const std::lock_guard<std::mutex> lock(g_scopes_mutex);
  const GridCoordinatesScope* scope = g_newest_scope;
  return scope == nullptr
             ? std::string()
             : fmt::format(", grid (dp {}, pp {}, tp {})", scope->dp_, scope->pp_, scope->tp_);
}

Error::Error(const std::string& message) : std::runtime_error(message), grid_(grid_part()) {}
Error::Error(const char* message) : std::runtime_error(message), grid_(grid_part()) {}

namespace {
std::atomic<int> g_world_rank{-1}, g_world_size{0}; // remember_world's
} // namespace

void remember_world(int rank, int size) {
  g_world_size = size;
  g_world_rank = rank;
}

std::string where() {
  std::string text;
  if (mpi_running()) {
    int rank = g_world_rank, size = g_world_size;
    if (rank < 0) { // MPI started without MpiRuntime (a benchmark): asked on the calling thread
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    text = fmt::format("rank {} of {} on host {}", rank, size, host_name());
  } else {
    text = fmt::format("process {} on host {}", static_cast<long>(getpid()), host_name());
  }
  return text + grid_part();
}

bool output_drained(int fd, double timeout_seconds) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return true;
  // FIONREAD counts a pipe's unread bytes from either end; SIOCOUTQ, a socket's bytes the peer
  // has not taken yet.
  unsigned long request = 0;
  if (S_ISFIFO(st.st_mode)) {
    request = FIONREAD;
  } else if (S_ISSOCK(st.st_mode)) {
    request = SIOCOUTQ;
  } else {
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  while (true) {
    int unread = 0;
    if (ioctl(fd, request, &unread) != 0 || unread <= 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void abort_job(const std::string& message, const std::string& grid_context) {
  std::string at = where();
  if (at.find(", grid (") == std::string::npos) at += grid_context;
  std::fprintf(stderr, "gridlm: fatal error on %s:\n  %s\n", at.c_str(), message.c_str());
  std::fflush(nullptr);
  if (mpi_running()) {
    // Seen in CI: a run that ended by MPI_Abort with none of its ranks' last lines in the log.
    // Once a rank's pipe is read, mpiexec's proxy still passes the lines on to mpiexec, hence
    // the pause after.
    const bool drained = output_drained(STDOUT_FILENO, 1.0) && output_drained(STDERR_FILENO, 1.0);
    if (drained) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::exit(1);
}

} // namespace gridlm
