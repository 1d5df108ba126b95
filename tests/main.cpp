// The one GoogleTest main for every gridlm test: initialises MPI and Kokkos around the run.
// Rank 0 prints GoogleTest's usual report; the other ranks print only their own failures,
// each line tagged with the rank; the exit status is non-zero if any rank failed.
#include <mpi.h>

#include <cstdio>

#include <gtest/gtest.h>

#include "layers/kokkos_runtime.hpp"
#include "parallel/mpi_runtime.hpp"

namespace {

class RankFailurePrinter : public testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
    std::fflush(stderr);
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char** argv) {
  gridlm::parallel::MpiRuntime mpi(argc, argv);
  int result = 0;
  {
    gridlm::layers::KokkosRuntime kokkos(argc, argv);
    testing::InitGoogleTest(&argc, argv);
    if (mpi.rank() != 0) {
      testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(mpi.rank()));
    }
    const int local = RUN_ALL_TESTS();
    MPI_Allreduce(&local, &result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (mpi.rank() == 0 && result != local) {
      std::fprintf(stderr, "gridlm tests: some tests failed on other ranks (see [rank N] lines)\n");
    }
  }
  return result;
}
