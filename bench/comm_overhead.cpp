// Benchmark: cost of parallel::Comm's typed wrappers over raw MPI, in one run. For each message
// size, times all-reduce (sum, float) through MpiComm and through MPI_Allreduce directly,
// interleaved so that machine noise hits both alike, and prints medians and their ratio.
// Usage: mpiexec -n 2 bench_comm_overhead [--reps N]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "parallel/comm_mpi.hpp"
#include "parallel/mpi_runtime.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  gridlm::parallel::MpiRuntime mpi(argc, argv);
  int reps = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(3, std::atoi(argv[i + 1]));
  }
  gridlm::parallel::MpiComm comm(gridlm::parallel::borrow_comm(MPI_COMM_WORLD));
  if (mpi.rank() == 0) {
    std::printf("all-reduce (sum, f32) on %d ranks, median of %d runs each\n", mpi.size(), reps);
    std::printf("%12s %14s %14s %10s %12s\n", "floats", "gridlm us", "raw MPI us", "ratio",
                "gridlm GB/s");
  }
  for (std::size_t n : {std::size_t(1) << 8, std::size_t(1) << 12, std::size_t(1) << 16,
                        std::size_t(1) << 20, std::size_t(1) << 22}) {
    std::vector<float> a(n, 1.0f), b(n, 1.0f);
    std::vector<double> t_wrap, t_raw;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      comm.all_reduce(gridlm::Span<float>(a));
      t_wrap.push_back(MPI_Wtime() - t0);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, b.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      t_raw.push_back(MPI_Wtime() - t0);
    }
    const double w = median(t_wrap), raw = median(t_raw);
    if (mpi.rank() == 0) {
      std::printf("%12zu %14.1f %14.1f %10.3f %12.2f\n", n, w * 1e6, raw * 1e6, w / raw,
                  double(n) * sizeof(float) / w / 1e9);
    }
  }
  return 0;
}
