// Error types and "where am I" context for messages: every error gridlm reports names the
// rank, the host and, while a grid exists, the rank's (dp, pp, tp) coordinates.
#pragma once

#include <stdexcept>
#include <string>

namespace gridlm {

// An error seen by this rank. Uncaught, it ends the job through abort_job(). It keeps the grid
// coordinates where it was thrown, since the grid may be gone by the time it is reported.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message);
  explicit Error(const char* message);
  // ", grid (dp 1, pp 0, tp 1)" as where() said it at the throw, or "" outside any grid.
  const std::string& grid_context() const { return grid_; }

private:
  std::string grid_;
};

// An error every rank knows about, because the ranks agreed on it (see agree.hpp): the job
// can exit cleanly with a non-zero status instead of MPI_Abort. what() is the report that
// rank 0 prints; it is the same on every rank.
class CollectiveError : public Error {
public:
  // reporter: whether this rank prints the report (rank 0 of the communicator that agreed,
  // which need not hold world rank 0); agreed_by: how many ranks throw it (the size of that
  // communicator); local: this rank's own message ("" when another rank failed).
  CollectiveError(const std::string& report, bool reporter, int agreed_by, std::string local = "")
      : Error(report), reporter_(reporter), agreed_by_(agreed_by), local_(std::move(local)) {}
  bool reporter() const { return reporter_; }
  int agreed_by() const { return agreed_by_; }
  const std::string& local() const { return local_; }

private:
  bool reporter_;
  int agreed_by_;
  std::string local_;
};

// "rank 3 of 8 on host n01, grid (dp 1, pp 0, tp 1)"; usable before MPI_Init and after
// MPI_Finalize, where it says less, and from any thread (io::Prefetcher's reads). The grid part
// names the newest GridCoordinatesScope alive, if any.
std::string where();

// The world rank and size where() says, noted once on the main thread right after MPI_Init
// (parallel::MpiRuntime): MPI_THREAD_FUNNELED lets no other thread ask MPI for them.
void remember_world(int rank, int size);

// Registers this rank's grid coordinates for where() while it lives. parallel::Grid holds one,
// so errors name the coordinates of the grid that exists, and none once it is gone. Scopes
// normally nest (a test's MPI_COMM_SELF grid inside the world grid): destroying one restores the
// one registered before it; one destroyed out of order is simply dropped, so where() never names
// a scope that is gone.
class GridCoordinatesScope {
public:
  GridCoordinatesScope(int dp, int pp, int tp);
  ~GridCoordinatesScope();
  GridCoordinatesScope(const GridCoordinatesScope&) = delete;
  GridCoordinatesScope& operator=(const GridCoordinatesScope&) = delete;

private:
  friend std::string grid_part();
  int dp_, pp_, tp_;
  // The registrations form a list, newest first, guarded by a mutex in diagnostics.cpp.
  GridCoordinatesScope* older_ = nullptr;
  GridCoordinatesScope* newer_ = nullptr;
};

// ", grid (dp 1, pp 0, tp 1)" for the newest live GridCoordinatesScope, or "".
std::string grid_part();

// This process's host name.
std::string host_name();

// Whether everything written to `fd` has been read at the other end, waiting up to
// `timeout_seconds`: for a pipe or a socket (how mpiexec and srun collect a rank's output),
// the bytes still unread; anything else (a file, a terminal) is drained at once.
bool output_drained(int fd, double timeout_seconds);

// Prints the message with where() to stderr and ends every rank with MPI_Abort (or exits,
// when MPI is not running). For errors other ranks cannot know about. It waits (2 s at most)
// for the launcher to have read the message first: MPI_Abort makes it end every rank at once,
// and what it has not yet read from their pipes is lost.
// `grid_context` (an Error's) is named when no grid exists any more.
[[noreturn]] void abort_job(const std::string& message, const std::string& grid_context = "");

// Runs `body` and returns what it returns. An error it throws that the ranks have not agreed on
// (anything but a CollectiveError) ends the job at once through abort_job(): unwinding further
// would run destructors that are collective (an MPI-IO file's close waits for every rank) while
// the other ranks wait in the step's collectives, and the job would hang without a word.
template <class Body>
auto end_job_on_local_error(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const CollectiveError&) {
    throw;
  } catch (const Error& e) {
    abort_job(e.what(), e.grid_context());
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
}

} // namespace gridlm
