// Direct I/O of tensor shards (io::DirectFile, ParallelFile::write_shard/read_shard): a file
// written with O_DIRECT holds exactly what the page-cache path writes, whatever the alignment
// of the runs, with ranks whose runs share a block at their boundary, beside boxes that go
// through MPI-IO (column slices, small or uneven shares) in the same tensor; another partition
// reads it back direct. Runs at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "io/direct_file.hpp"
#include "io/h5_file.hpp"
#include "io/parallel_h5.hpp"
#include "parallel/comm_mpi.hpp"
#include "tests/dataset_util.hpp"

using namespace gridlm;

namespace {

// This rank's own file (DirectFile is not collective).
std::string rank_path(const std::string& stem) {
  return test::shared_path(stem) + "." + std::to_string(test::world_rank());
}

std::vector<unsigned char> pattern(std::size_t n) {
  std::vector<unsigned char> bytes(n);
  for (std::size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<unsigned char>((i * 7 + i / 251) & 0xff);
  return bytes;
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

std::uint64_t sum_over_ranks(std::uint64_t value) {
  std::vector<std::uint64_t> v{value};
  parallel::MpiComm all(parallel::borrow_comm(MPI_COMM_WORLD));
  all.all_reduce(Span<std::uint64_t>(v));
  return v[0];
}

// Row r of `rows` by weights: rank q's share grows with q (the last ranks' shares are over
// 1 MiB and go direct; rank 0's, at 4 ranks, is under it and goes through MPI-IO), or shrinks
// when `reverse`.
std::uint64_t row_begin(int q, int ranks, std::uint64_t rows, bool reverse) {
  std::uint64_t below = 0, all = 0;
  for (int i = 0; i < ranks; ++i) {
    const std::uint64_t w = reverse ? std::uint64_t(ranks - i) : std::uint64_t(i + 1);
    all += w;
    if (i < q) below += w;
  }
  return rows * below / all;
}

// The tensors of the file: name, global shape, and this rank's shard of them.
struct Tensor {
  std::string name;
  io::TensorShard shard;
};

std::vector<Tensor> tensors(int rank, int ranks, bool reverse) {
  const std::uint64_t n = std::uint64_t(ranks);
  std::vector<Tensor> out;
  // Rows of 257 floats (1028 bytes: no boundary between ranks falls on a block).
  {
    const std::uint64_t rows = 1300 * n + 7, cols = 257;
    const std::uint64_t b = row_begin(rank, ranks, rows, reverse),
                        e = row_begin(rank + 1, ranks, rows, reverse);
    Tensor t{"rows", {{rows, cols}, {e - b, cols}, {}, {}}};
    t.shard.file.push_back({{b, 0}, {e - b, cols}});
    t.shard.memory.push_back({{0, 0}, {e - b, cols}});
    out.push_back(t);
  }
  // Three slabs, each rank a run of rows in every slab: three contiguous boxes.
  {
    const std::uint64_t slabs = 3, rows = 1300 * n + 5, cols = 257;
    const std::uint64_t b = row_begin(rank, ranks, rows, reverse),
                        e = row_begin(rank + 1, ranks, rows, reverse);
    Tensor t{"group/slabs", {{slabs, rows, cols}, {slabs, e - b, cols}, {}, {}}};
    for (std::uint64_t s = 0; s < slabs; ++s) {
      t.shard.file.push_back({{s, b, 0}, {1, e - b, cols}});
      t.shard.memory.push_back({{s, 0, 0}, {1, e - b, cols}});
    }
    out.push_back(t);
  }
  // Columns: not contiguous in the file, through MPI-IO.
  {
    const std::uint64_t rows = 1100, cols = 300 * n;
    Tensor t{"columns", {{rows, cols}, {rows, 300}, {}, {}}};
    t.shard.file.push_back({{0, 300 * std::uint64_t(rank)}, {rows, 300}});
    t.shard.memory.push_back({{0, 0}, {rows, 300}});
    out.push_back(t);
  }
  // A vector, one run per rank, and a small matrix that rank 0 alone writes.
  {
    const std::uint64_t size = 300007 * n;
    const std::uint64_t b = row_begin(rank, ranks, size, reverse),
                        e = row_begin(rank + 1, ranks, size, reverse);
    Tensor t{"vector", {{size}, {e - b}, {}, {}}};
    t.shard.file.push_back({{b}, {e - b}});
    t.shard.memory.push_back({{0}, {e - b}});
    out.push_back(t);
  }
  {
    Tensor t{"small", {{10, 3}, {10, 3}, {}, {}}};
    if (rank == 0) {
      t.shard.file.push_back({{0, 0}, {10, 3}});
      t.shard.memory.push_back({{0, 0}, {10, 3}});
    }
    out.push_back(t);
  }
  return out;
}

// Element i of a tensor holds its flat index plus the tensor's number (exact in float32 here).
float value(std::size_t tensor, std::uint64_t flat) { return float(flat) + 0.25f * tensor; }

// The rank's memory for a shard: each box's elements with their global values.
std::vector<float> shard_values(std::size_t tensor, const io::TensorShard& s) {
  std::vector<float> local(io::elements(s.local_shape), -1.0f);
  const std::size_t dims = s.global_shape.size();
  for (std::size_t b = 0; b < s.file.size(); ++b) {
    const io::Box &f = s.file[b], &m = s.memory[b];
    for (std::uint64_t k = 0; k < io::elements(f.count); ++k) {
      std::uint64_t rest = k, global = 0, mine = 0, stride_g = 1, stride_m = 1;
      for (std::size_t d = dims; d-- > 0;) {
        const std::uint64_t at = rest % f.count[d];
        rest /= f.count[d];
        global += (f.start[d] + at) * stride_g;
        mine += (m.start[d] + at) * stride_m;
        stride_g *= s.global_shape[d];
        stride_m *= s.local_shape[d];
      }
      local[mine] = value(tensor, global);
    }
  }
  return local;
}

void write_all(const std::string& path, bool direct, std::uint64_t& direct_bytes,
               io::Transfer transfer = io::Transfer::independent) {
  const int rank = test::world_rank(), ranks = test::world_size();
  io::ParallelFile f = io::ParallelFile::create(MPI_COMM_WORLD, path);
  f.set_direct_io(direct);
  const std::vector<Tensor> ts = tensors(rank, ranks, false);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const std::vector<float> local = shard_values(i, ts[i].shard);
    f.write_shard(ts[i].name, ts[i].shard, Span<const float>(local), transfer);
  }
  f.flush();
  direct_bytes = f.direct_bytes();
}

} // namespace

TEST(DirectIo, ContiguousRunsOfBoxes) {
  using R = std::optional<io::FlatRun>;
  auto run = [](std::vector<std::uint64_t> start, std::vector<std::uint64_t> count,
                std::vector<std::uint64_t> shape) {
    return io::contiguous_run(start, count, shape);
  };
  auto is = [](const R& r, std::uint64_t first, std::uint64_t count) {
    return r && r->first == first && r->count == count;
  };
  EXPECT_TRUE(is(run({5}, {7}, {20}), 5, 7));
  EXPECT_TRUE(is(run({2, 0}, {3, 8}, {6, 8}), 16, 24));          // whole rows
  EXPECT_TRUE(is(run({2, 3}, {1, 4}, {6, 8}), 19, 4));           // part of one row
  EXPECT_FALSE(run({2, 3}, {2, 4}, {6, 8}));                     // a column slice
  EXPECT_TRUE(is(run({1, 2, 0}, {1, 3, 5}, {4, 6, 5}), 40, 15)); // rows of one slab
  EXPECT_FALSE(run({1, 2, 0}, {2, 3, 5}, {4, 6, 5}));            // rows of two slabs
  EXPECT_TRUE(is(run({1, 0, 0}, {2, 6, 5}, {4, 6, 5}), 30, 60)); // whole slabs
  EXPECT_TRUE(is(run({}, {}, {}), 0, 1));                        // a scalar
  EXPECT_TRUE(is(run({3, 0}, {0, 8}, {6, 8}), 0, 0));            // nothing
}

TEST(DirectIo, RunsOfAnyAlignmentWriteAndReadTheirBytes) {
  const std::string path = rank_path("direct_runs");
  const std::uint64_t size = 3 * io::DirectFile::staging_bytes + 12345;
  const std::vector<unsigned char> bytes = pattern(size);
  ::close(::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644));
  std::unique_ptr<io::DirectFile> out = io::DirectFile::open(path, io::DirectFile::Mode::write);
  ASSERT_TRUE(out) << "the file system of " << path << " refuses O_DIRECT";
  // Runs that tile the file, none of whose ends but the first falls on a block, written out of
  // order; one fits inside a block, one spans the staging buffer twice.
  const std::uint64_t cuts[] = {
      0, 10, 4000, 4100, 4101, 2 * io::DirectFile::staging_bytes + 77, size - 5000, size};
  const int order[] = {3, 0, 5, 1, 6, 2, 4};
  for (int i : order)
    out->write(cuts[i], bytes.data() + cuts[i], cuts[i + 1] - cuts[i]);
  out->sync();
  EXPECT_GT(out->direct_bytes(), size - 4 * io::DirectFile::block() * 8);
  EXPECT_LE(out->direct_bytes(), size);
  out.reset();
  EXPECT_EQ(file_bytes(path), bytes);

  std::unique_ptr<io::DirectFile> in = io::DirectFile::open(path, io::DirectFile::Mode::read);
  ASSERT_TRUE(in);
  for (auto [offset, count] :
       {std::pair<std::uint64_t, std::uint64_t>{0, size},
        {1, 1},
        {4095, 2},
        {io::DirectFile::staging_bytes - 3, io::DirectFile::staging_bytes + 9},
        {size - 17, 17}}) {
    std::vector<unsigned char> back(count, 0);
    in->read(offset, back.data(), count);
    EXPECT_TRUE(std::equal(back.begin(), back.end(), bytes.begin() + offset))
        << count << " bytes at " << offset;
  }
  EXPECT_GE(in->direct_bytes(), size);
  std::vector<unsigned char> past(100);
  try {
    in->read(size - 50, past.data(), past.size());
    ADD_FAILURE() << "a read past the end of the file succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut short"), std::string::npos) << e.what();
  }
  EXPECT_THROW(in->write(0, bytes.data(), 10), Error); // opened for reading
  in.reset();
  std::remove(path.c_str());
  EXPECT_FALSE(io::DirectFile::open(path, io::DirectFile::Mode::read)); // missing: MPI-IO says so
}

TEST(DirectIo, ShardsWrittenDirectEqualThePageCachePathAndReadBackUnderAnotherPartition) {
  const int rank = test::world_rank(), ranks = test::world_size();
  const std::string direct_path = test::shared_path("direct_shards");
  const std::string cached_path = test::shared_path("cached_shards");
  const std::string collective_path = test::shared_path("collective_shards");
  std::uint64_t direct = 0, cached = 0, collective = 0;
  write_all(direct_path, true, direct);
  write_all(cached_path, false, cached);
  // MPI-IO's aggregators write back the gaps between their pieces: never direct beside them.
  write_all(collective_path, true, collective, io::Transfer::collective);
  EXPECT_GT(sum_over_ranks(direct), 0u);
  EXPECT_EQ(sum_over_ranks(cached), 0u);
  EXPECT_EQ(sum_over_ranks(collective), 0u);
  // The largest share of the rows goes direct; the columns never do.
  const std::vector<Tensor> written = tensors(rank, ranks, false);
  if (rank == ranks - 1) {
    EXPECT_GT(direct, 1u << 20);
  }

  // Both files hold every tensor exactly, read whole by one-process HDF5.
  if (rank == 0) {
    for (const std::string& path : {direct_path, cached_path, collective_path}) {
      io::H5File file = io::H5File::open_read(path);
      for (std::size_t i = 0; i < written.size(); ++i) {
        const io::TensorShard& s = written[i].shard;
        std::vector<float> stored(io::elements(s.global_shape));
        file.read(written[i].name, stored.data(), stored.size());
        std::uint64_t wrong = 0;
        for (std::uint64_t k = 0; k < stored.size(); ++k)
          wrong += stored[k] != value(i, k);
        EXPECT_EQ(wrong, 0u) << written[i].name << " in " << path;
      }
    }
  }

  // Another partition reads the direct file back, direct.
  const std::vector<Tensor> reading = tensors(rank, ranks, true);
  io::ParallelFile f = io::ParallelFile::open_read(MPI_COMM_WORLD, direct_path);
  for (std::size_t i = 0; i < reading.size(); ++i) {
    const io::TensorShard& s = reading[i].shard;
    std::vector<float> back(io::elements(s.local_shape), -1.0f);
    f.read_shard(reading[i].name, s, Span<float>(back), io::Transfer::independent);
    EXPECT_EQ(back, shard_values(i, s)) << reading[i].name;
  }
  // Rows go direct where a rank's share is 1 MiB or more; columns only when one rank has all.
  const std::uint64_t row_share = io::elements(reading[0].shard.local_shape) * sizeof(float);
  EXPECT_EQ(f.reads_directly(reading[0].shard), row_share >= io::ParallelFile::direct_min_bytes)
      << row_share << " bytes";
  EXPECT_EQ(f.reads_directly(reading[2].shard), ranks == 1);
  if (rank == 0) {
    EXPECT_GT(f.direct_bytes(), 1u << 20); // the largest share when reversed
  }
  f.close();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    std::remove(direct_path.c_str());
    std::remove(cached_path.c_str());
    std::remove(collective_path.c_str());
  }
}

// A disk that fills during a direct write: the error names the file and the reason (each rank
// its own 1 MiB tmpfs; mounting needs root, as tests/cli/checkpoint_faults.sh does).
TEST(DirectIo, AFullDiskIsNamed) {
  const std::string dir = rank_path("direct_full") + ".d";
  ASSERT_EQ(std::system(("mkdir -p " + dir + " && mount -t tmpfs -o size=1m tmpfs " + dir).c_str()),
            0)
      << "cannot mount a tmpfs on " << dir << " (needs root)";
  const std::string path = dir + "/file";
  ::close(::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644));
  const std::vector<unsigned char> bytes = pattern(3u << 20);
  bool opened = false;
  std::string message;
  {
    std::unique_ptr<io::DirectFile> out = io::DirectFile::open(path, io::DirectFile::Mode::write);
    opened = out != nullptr;
    try {
      if (out) out->write(100, bytes.data(), bytes.size());
    } catch (const Error& e) {
      message = e.what();
    }
  }
  EXPECT_EQ(std::system(("umount " + dir + " && rmdir " + dir).c_str()), 0);
  ASSERT_TRUE(opened) << "the tmpfs refuses O_DIRECT (Linux before 6.6)";
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
}
