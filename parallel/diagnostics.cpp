// Implementation of the rank/host/grid context used in every error message.
#include "parallel/diagnostics.hpp"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace gridlm {
namespace {
// Coordinates are process-wide by nature: one grid per process.
int g_coords[3] = {-1, -1, -1};

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}
} // namespace

void set_grid_coordinates(int dp, int pp, int tp) {
  g_coords[0] = dp;
  g_coords[1] = pp;
  g_coords[2] = tp;
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "unknown-host";
  return buf.data();
}

std::string where() {
  std::string text;
  if (mpi_running()) {
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    text = fmt::format("rank {} of {} on host {}", rank, size, host_name());
  } else {
    text = fmt::format("process {} on host {}", static_cast<long>(getpid()), host_name());
  }
  if (g_coords[0] >= 0) {
    text += fmt::format(", grid (dp {}, pp {}, tp {})", g_coords[0], g_coords[1], g_coords[2]);
  }
  return text;
}

void abort_job(const std::string& message) {
  std::fprintf(stderr, "gridlm: fatal error on %s:\n  %s\n", where().c_str(), message.c_str());
  std::fflush(stderr);
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

} // namespace gridlm
