// Benchmark helper: how fast io::TokenDataset delivers training samples on one rank, in the
// permuted order training uses, read directly and through io::Prefetcher (consumed as fast as
// it delivers). Prints tokens/s and MB/s of token data for each; bench/data_io.sh compares them
// with a plain sequential read of the same file and with what training consumes.
//   bench_reader_throughput DATASET [SEQ_LEN=128] [BATCH=8] [BATCHES=2000]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/prefetcher.hpp"
#include "io/token_dataset.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_reader_throughput DATASET [SEQ_LEN] [BATCH] [BATCHES]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int T = argc > 2 ? std::atoi(argv[2]) : 128, B = argc > 3 ? std::atoi(argv[3]) : 8;
  const long batches = argc > 4 ? std::atol(argv[4]) : 2000;
  int status = 0;
  try {
    gridlm::io::TokenDatasetOptions o;
    o.sample_length = T + 1;
    const gridlm::io::TokenDataset data(MPI_COMM_WORLD, path, o);
    const int bytes = data.info().token_bytes;
    auto report = [&](const char* how, double seconds) {
      const double tokens = double(batches) * B * (T + 1);
      std::printf("RESULT reader=%s tokens_per_s=%.0f mb_per_s=%.1f batches=%ld batch=%dx%d\n", how,
                  tokens / seconds, tokens * bytes / seconds / 1e6, batches, B, T + 1);
    };
    std::vector<std::int32_t> out(std::size_t(B) * (T + 1));
    auto t0 = std::chrono::steady_clock::now();
    for (long n = 0; n < batches; ++n) {
      for (int b = 0; b < B; ++b)
        data.sample(out.data() + std::size_t(b) * (T + 1), std::uint64_t(n) * B + b, T + 1);
    }
    report("direct", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    t0 = std::chrono::steady_clock::now();
    {
      gridlm::io::Prefetcher p(
          data, [B](long n) { return std::uint64_t(n) * B; }, B, T + 1, 8, 1);
      for (long n = 0; n < batches; ++n)
        out = p.get(n);
    }
    report("prefetched",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reader_throughput: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
