// Helpers shared by the MPI tests.
#pragma once

#include <functional>
#include <string>

#include <mpi.h>

#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/grid.hpp"

namespace gridlm::test {

inline int world_rank() { return parallel::comm_rank(MPI_COMM_WORLD); }
inline int world_size() { return parallel::comm_size(MPI_COMM_WORLD); }

// Runs `body` on every rank and returns the CollectiveError every rank then throws, or "" if
// no rank failed. Errors a body throws without agreement are agreed on here.
inline std::string collective_error(const std::function<void()>& body) {
  try {
    parallel::run_agreed(MPI_COMM_WORLD, body);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "";
}

// The error every rank gets when building a grid with `options`, or "" when it builds.
inline std::string grid_error(const parallel::GridOptions& options) {
  return collective_error([&] { parallel::Grid::create(MPI_COMM_WORLD, options); });
}

} // namespace gridlm::test
