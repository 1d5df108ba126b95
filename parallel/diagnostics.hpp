// Error types and "where am I" context for messages: every error gridlm reports names the
// rank, the host and, once the grid exists, the rank's (dp, pp, tp) coordinates.
#pragma once

#include <stdexcept>
#include <string>

namespace gridlm {

// An error seen by this rank. Uncaught, it ends the job through abort_job().
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// An error every rank knows about, because the ranks agreed on it (see agree.hpp): the job
// can exit cleanly with a non-zero status instead of MPI_Abort. what() is the report that
// rank 0 prints; it is the same on every rank.
class CollectiveError : public Error {
public:
  using Error::Error;
};

// "rank 3 of 8 on host n01, grid (dp 1, pp 0, tp 1)"; usable before MPI_Init and after
// MPI_Finalize, where it says less.
std::string where();

// Set by parallel::Grid once coordinates exist, so that later errors name them.
void set_grid_coordinates(int dp, int pp, int tp);

// This process's host name.
std::string host_name();

// Prints the message with where() to stderr and ends every rank with MPI_Abort (or exits,
// when MPI is not running). For errors other ranks cannot know about.
[[noreturn]] void abort_job(const std::string& message);

} // namespace gridlm
