// Parallel HDF5 over MPI-IO: a vector written collectively by one partition of the ranks reads
// back exactly under another (what checkpoints that reshard will build on), and bad files give
// clear errors on every rank. Runs at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "io/parallel_h5.hpp"
#include "parallel/agree.hpp"
#include "parallel/diagnostics.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;

namespace {

// One path for all ranks, unique per test run.
std::string shared_path(const std::string& stem) {
  long id = test::world_rank() == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return "/tmp/gridlm_test_" + stem + "_" + std::to_string(id) + ".h5";
}

// Uneven split of n elements: rank r gets [begin(r), begin(r+1)); `reverse` gives the big
// shares to the other end, so write and read partitions differ.
std::uint64_t begin_of(int r, int ranks, std::uint64_t n, bool reverse) {
  auto weight_prefix = [&](int q) {
    std::uint64_t s = 0;
    for (int i = 0; i < q; ++i)
      s += reverse ? ranks - i : i + 1;
    return s;
  };
  return n * weight_prefix(r) / weight_prefix(ranks);
}

} // namespace

TEST(ParallelH5, WrittenByOnePartitionReadByAnother) {
  const int r = test::world_rank(), n = test::world_size();
  const std::uint64_t total = 1000;
  const std::string path = shared_path("reshard");
  {
    io::ParallelFile f = io::ParallelFile::create(MPI_COMM_WORLD, path);
    const std::uint64_t b = begin_of(r, n, total, false), e = begin_of(r + 1, n, total, false);
    std::vector<float> mine(e - b);
    for (std::uint64_t i = b; i < e; ++i)
      mine[i - b] = 0.5f * float(i);
    f.write_floats("w", total, b, Span<const float>(mine));
    // A rank with nothing to write still takes part in the collective.
    f.write_floats("empty_on_most", 4, 0,
                   r == 0 ? Span<const float>(mine.data(), 4) : Span<const float>());
  }
  {
    io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_WORLD, path);
    EXPECT_EQ(f.dataset_size("w"), total);
    const std::uint64_t b = begin_of(r, n, total, true), e = begin_of(r + 1, n, total, true);
    std::vector<float> got(e - b, -1.0f);
    f.read_floats("w", b, Span<float>(got));
    for (std::uint64_t i = b; i < e; ++i)
      ASSERT_EQ(got[i - b], 0.5f * float(i)) << i;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) std::remove(path.c_str());
}

TEST(ParallelH5, MissingFileIsReportedByEveryRank) {
  const std::string msg = test::collective_error(
      [] { io::ParallelFile::open_read(MPI_COMM_WORLD, "/tmp/gridlm_no_such_file.h5"); });
  EXPECT_NE(msg.find("cannot open '/tmp/gridlm_no_such_file.h5': it does not exist"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("rank"), 0u) << msg;
}

TEST(ParallelH5, NonHdf5FileIsReportedByEveryRank) {
  const std::string path = shared_path("not_hdf5");
  if (test::world_rank() == 0) std::ofstream(path) << "this is text, not HDF5\n";
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string msg =
      test::collective_error([&] { io::ParallelFile::open_read(MPI_COMM_WORLD, path); });
  EXPECT_NE(msg.find("is not an HDF5 file"), std::string::npos) << msg;
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::remove(path.c_str());
}

TEST(ParallelH5, MissingDatasetAndOutOfRangeReadsAreRefused) {
  const std::string path = shared_path("ranges");
  {
    io::ParallelFile f = io::ParallelFile::create(MPI_COMM_WORLD, path);
    std::vector<float> v(test::world_rank() == 0 ? 8 : 0, 1.0f);
    f.write_floats("v", 8, 0, Span<const float>(v));
  }
  io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_WORLD, path);
  std::string msg = test::collective_error([&] { f.dataset_size("nope"); });
  EXPECT_NE(msg.find("has no dataset 'nope'"), std::string::npos) << msg;
  std::vector<float> out(4);
  msg = test::collective_error([&] { f.read_floats("v", 6, Span<float>(out)); });
  EXPECT_NE(msg.find("range [6, 10) is outside its 8 elements"), std::string::npos) << msg;
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::remove(path.c_str());
}

// The byte ranges behind the read-ahead hint hold exactly the datasets' elements (read back
// here with plain file I/O), touching datasets merge, and chunked or missing ones are left out.
TEST(ParallelH5, ByteRangesHoldTheDatasetsBytes) {
  const std::string path = shared_path("byte_ranges");
  std::vector<float> a(300), b(200);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = 1.5f * float(i) + 0.25f;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = -2.0f * float(i) - 0.5f;
  const bool first = test::world_rank() == 0;
  {
    io::ParallelFile f = io::ParallelFile::create(MPI_COMM_WORLD, path);
    f.write_floats("a", a.size(), 0, first ? Span<const float>(a) : Span<const float>());
    f.write_floats("g/b", b.size(), 0, first ? Span<const float>(b) : Span<const float>());
    f.write<float>("chunked", 64, 0, first ? Span<const float>(a.data(), 64) : Span<const float>(),
                   16);
  }
  io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_WORLD, path);
  auto bytes_at = [&](std::uint64_t offset, std::uint64_t size) {
    std::vector<float> v(size / sizeof(float));
    std::ifstream in(path, std::ios::binary);
    in.seekg(std::streamoff(offset));
    in.read(reinterpret_cast<char*>(v.data()), std::streamsize(size));
    EXPECT_TRUE(in.good()) << offset << " + " << size;
    return v;
  };
  for (const auto& [name, values] : {std::make_pair("a", a), std::make_pair("g/b", b)}) {
    const auto ranges = f.byte_ranges({name});
    ASSERT_EQ(ranges.size(), 1u) << name;
    ASSERT_EQ(ranges[0].second, values.size() * sizeof(float)) << name;
    EXPECT_EQ(bytes_at(ranges[0].first, ranges[0].second), values) << name;
  }
  EXPECT_TRUE(f.byte_ranges({"chunked", "missing"}).empty());
  const auto both = f.byte_ranges({"g/b", "a", "chunked", "a"});
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < both.size(); ++i) {
    total += both[i].second;
    if (i > 0) {
      EXPECT_GT(both[i].first, both[i - 1].first + both[i - 1].second);
    }
  }
  EXPECT_EQ(total, (a.size() + b.size()) * sizeof(float));
  f.prefetch({"a", "g/b", "missing"});
  std::vector<float> got(b.size());
  f.read_floats("g/b", 0, Span<float>(got));
  EXPECT_EQ(got, b);
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  if (first) std::remove(path.c_str());
}

TEST(ParallelH5, UnwritableDirectoryIsReported) {
  const std::string msg = test::collective_error(
      [] { io::ParallelFile::create(MPI_COMM_WORLD, "/nonexistent_dir_gridlm/x.h5"); });
  EXPECT_NE(msg.find("cannot create HDF5 file '/nonexistent_dir_gridlm/x.h5'"), std::string::npos)
      << msg;
}
