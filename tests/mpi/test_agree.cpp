// Agreement on failure: an error on any one rank reaches every rank as the same report, also
// when it was first agreed over fewer ranks (one rank's MPI_COMM_SELF inside a world agreement).
#include <gtest/gtest.h>

#include <filesystem>
#include <system_error>

#include <mpi.h>

#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;

TEST(Agree, NoErrorNoThrow) {
  EXPECT_NO_THROW(parallel::agree_on_errors(MPI_COMM_WORLD, ""));
  EXPECT_NO_THROW(parallel::run_agreed(MPI_COMM_WORLD, [] {}));
}

TEST(Agree, OneRankFailsEveryRankThrowsTheSameReport) {
  const int rank = test::world_rank(), size = test::world_size();
  const int bad = size - 1;
  std::string report;
  try {
    parallel::run_agreed(MPI_COMM_WORLD, [&] {
      if (rank == bad) throw Error("bad input in file x.toml");
    });
  } catch (const CollectiveError& e) {
    report = e.what();
  }
  EXPECT_EQ(report, "rank " + std::to_string(bad) + ": bad input in file x.toml");
}

// The standard library's exceptions (a file system error on one node) are agreed as well: the
// other ranks do not wait for the failed one.
TEST(Agree, AStandardExceptionOnOneRankIsAgreed) {
  const int rank = test::world_rank(), size = test::world_size();
  std::string report;
  try {
    parallel::run_agreed(MPI_COMM_WORLD, [&] {
      if (rank == size - 1) throw std::filesystem::filesystem_error("status", std::error_code());
    });
  } catch (const CollectiveError& e) {
    report = e.what();
  }
  EXPECT_EQ(report.rfind("rank " + std::to_string(size - 1) + ": filesystem error: status", 0), 0u)
      << report;
}

TEST(Agree, IdenticalMessagesAreGroupedByRankRanges) {
  const int rank = test::world_rank(), size = test::world_size();
  std::string report;
  try {
    parallel::agree_on_errors(MPI_COMM_WORLD, rank == 1 ? "other" : "same");
  } catch (const CollectiveError& e) {
    report = e.what();
  }
  std::string expected;
  if (size == 1) {
    expected = "rank 0: same";
  } else if (size == 2) {
    expected = "rank 0: same\nrank 1: other";
  } else if (size == 3) {
    expected = "ranks 0,2: same\nrank 1: other";
  } else {
    expected = "ranks 0,2-" + std::to_string(size - 1) + ": same\nrank 1: other";
  }
  EXPECT_EQ(report, expected);
}

// Rank 0 alone opens a file under MPI_COMM_SELF (gridlm sample, checkpoint inspect): the error
// agreed there must still reach the other ranks, which would otherwise wait for it forever.
TEST(Agree, AnErrorAgreedByFewerRanksIsAgreedAgain) {
  const int rank = test::world_rank(), size = test::world_size();
  std::string report;
  int reporters = 0;
  try {
    parallel::run_agreed(MPI_COMM_WORLD, [&] {
      if (rank != 0) return;
      parallel::run_agreed(MPI_COMM_SELF, [] { throw Error("cannot open 'x.h5'"); });
    });
  } catch (const CollectiveError& e) {
    report = e.what();
    reporters = e.reporter() ? 1 : 0;
  }
  EXPECT_EQ(report, "rank 0: cannot open 'x.h5'");
  MPI_Allreduce(MPI_IN_PLACE, &reporters, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(reporters, 1) << "one report, from rank 0 of the world, among " << size;
}
