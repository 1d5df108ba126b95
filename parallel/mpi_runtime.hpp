// MpiRuntime: MPI_Init_thread (MPI_THREAD_FUNNELED) on construction, MPI_Finalize on destruction.
// Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so that failures reach GRIDLM_MPI_CHECK with context,
// and the wait policy for the node (parallel.wait = "auto").
#pragma once

namespace gridlm::parallel {

class MpiRuntime {
public:
  MpiRuntime(int& argc, char**& argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // MPI_THREAD_* level the library granted.
  int thread_level() const { return thread_level_; }

private:
  int rank_ = 0;
  int size_ = 1;
  int thread_level_ = 0;
};

// "MPICH Version: 4.0.2 ..." first line of MPI_Get_library_version.
const char* mpi_library_version();

} // namespace gridlm::parallel
