// MPI start-up and shut-down.
#include "parallel/mpi_runtime.hpp"

#include <mpi.h>

#include <cstdio>
#include <string>

#include "parallel/mpi_check.hpp"
#include "parallel/wait_policy.hpp"

namespace gridlm::parallel {

MpiRuntime::MpiRuntime(int& argc, char**& argv) {
  int provided = 0;
  // FUNNELED: only the main thread calls MPI. MULTIPLE made MPICH take a mutex around every
  // progress poll (13% of a tensor-parallel step in perf); ask for more only when needed.
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "gridlm: MPI_Init_thread failed on %s\n", where().c_str());
    std::exit(1);
  }
  thread_level_ = provided;
  GRIDLM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  GRIDLM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  GRIDLM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  remember_world(rank_, size_);
  // Every program (tests included) waits politely on an oversubscribed node from its first
  // collective; parallel.wait may change this once a configuration is read.
  set_job_wait_policy("auto", MPI_COMM_WORLD);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* mpi_library_version() {
  static std::string text = [] {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(buf, &len);
    std::string s(buf, static_cast<std::size_t>(len));
    const auto eol = s.find('\n');
    return eol == std::string::npos ? s : s.substr(0, eol);
  }();
  return text.c_str();
}

} // namespace gridlm::parallel
