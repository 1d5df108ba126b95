// parallel::Comm (MPI backend, and StagedComm over it) on inputs whose results are exact
// integers in floating point: every collective, blocking and not, point-to-point in a ring, and
// collectives on each axis of a grid. Runs at 1, 2, 4 and 8 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>

#include "parallel/comm_mpi.hpp"
#include "parallel/comm_staged.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/grid.hpp"
#include "parallel/wait_policy.hpp"
#include "tests/test_util.hpp"

using namespace gridlm;
using namespace gridlm::parallel;

namespace {

MpiComm world_comm() { return MpiComm(borrow_comm(MPI_COMM_WORLD)); }

// Bytes a StagedComm copied each way (its copies are plain memcpy here: host memory).
struct Copied {
  std::size_t to_host = 0, to_device = 0;
};

std::unique_ptr<Comm> staged(const std::shared_ptr<Copied>& copied) {
  StagingCopies copies{[copied](void* host, const void* device, std::size_t bytes) {
                         std::memcpy(host, device, bytes);
                         copied->to_host += bytes;
                       },
                       [copied](void* device, const void* host, std::size_t bytes) {
                         std::memcpy(device, host, bytes);
                         copied->to_device += bytes;
                       }};
  return std::make_unique<StagedComm>(std::make_unique<MpiComm>(borrow_comm(MPI_COMM_WORLD)),
                                      std::move(copies));
}

// Every test below runs on MpiComm and on StagedComm over it ("mpi-staged"), with ranks that
// spin in MPI's waits and with ranks that yield their cores (blocking operations then go
// non-blocking and wait in parallel::complete): every path must give the same results for every
// operation, blocking or not.
class AnyComm : public testing::TestWithParam<std::tuple<std::string, WaitPolicy>> {
protected:
  void SetUp() override { set_wait_policy(std::get<1>(GetParam())); }
  void TearDown() override { set_wait_policy(saved_); }
  std::unique_ptr<Comm> make() {
    if (std::get<0>(GetParam()) == "mpi") {
      return std::make_unique<MpiComm>(borrow_comm(MPI_COMM_WORLD));
    }
    return staged(copied_);
  }
  std::shared_ptr<Copied> copied_ = std::make_shared<Copied>();
  WaitPolicy saved_ = wait_policy();
};

// A communicator whose group end fails, as NCCL's does when an operation inside the group
// failed (its other operations are not used here).
class FailingGroupEnd final : public Comm {
public:
  FailingGroupEnd() : Comm(0, 1) {}
  const char* backend() const override { return "failing-group-end"; }
  void end_group() override { throw Error("the group's end failed"); }

protected:
  Request start_all_reduce(const void*, void*, std::size_t, DType, ReduceOp, Mode) override {
    throw Error("unused");
  }
  Request start_reduce_scatter(const void*, void*, std::size_t, DType, ReduceOp, Mode) override {
    throw Error("unused");
  }
  Request start_all_gather(const void*, void*, std::size_t, DType, Mode) override {
    throw Error("unused");
  }
  Request start_broadcast(void*, std::size_t, DType, int, Mode) override { throw Error("unused"); }
  Request start_send(const void*, std::size_t, DType, int, int, Mode) override {
    throw Error("unused");
  }
  Request start_recv(void*, std::size_t, DType, int, int, Mode) override { throw Error("unused"); }
};

} // namespace

INSTANTIATE_TEST_SUITE_P(Backends, AnyComm,
                         testing::Combine(testing::Values("mpi", "mpi-staged"),
                                          testing::Values(WaitPolicy::spin, WaitPolicy::yield)),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param) + "_" +
                                              to_string(std::get<1>(param_info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(MpiComm, RankAndSizeMatchMpi) {
  MpiComm c = world_comm();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(c.rank(), rank);
  EXPECT_EQ(c.size(), size);
  EXPECT_STREQ(c.backend(), "mpi");
}

TEST_P(AnyComm, AllReduceSumMaxMinInPlace) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int n = c.size(), r = c.rank();
  std::vector<float> sum(5), mx(5), mn(5);
  for (int i = 0; i < 5; ++i)
    sum[i] = mx[i] = mn[i] = float(r * 10 + i);
  c.all_reduce(Span<float>(sum));
  c.all_reduce(Span<float>(mx), ReduceOp::max);
  c.all_reduce(Span<float>(mn), ReduceOp::min);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sum[i], float(10 * n * (n - 1) / 2 + n * i)) << i;
    EXPECT_EQ(mx[i], float((n - 1) * 10 + i));
    EXPECT_EQ(mn[i], float(i));
  }
}

TEST_P(AnyComm, AllReduceOutOfPlaceOtherTypes) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int n = c.size();
  const std::vector<std::int64_t> in{std::int64_t(c.rank()) << 40, 1};
  std::vector<std::int64_t> out(2);
  c.all_reduce(Span<const std::int64_t>(in), Span<std::int64_t>(out));
  EXPECT_EQ(out[0], (std::int64_t(n) * (n - 1) / 2) << 40);
  EXPECT_EQ(out[1], n);
  std::vector<double> d{0.5 * c.rank()};
  c.all_reduce(Span<double>(d));
  EXPECT_DOUBLE_EQ(d[0], 0.25 * n * (n - 1));
}

// Debian's MPICH 4.0 compares MPI_UINT64_T as signed in MPI_MAX / MPI_MIN; values past 2^63
// show whether Comm gets unsigned order right anyway.
TEST_P(AnyComm, UnsignedMaxAndMinPast2To63) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const std::uint64_t big = (std::uint64_t(1) << 63) + std::uint64_t(c.rank());
  std::vector<std::uint64_t> mx{big, 5}, mn{big, std::uint64_t(5 + c.rank())};
  c.all_reduce(Span<std::uint64_t>(mx), ReduceOp::max);
  c.all_reduce(Span<std::uint64_t>(mn), ReduceOp::min);
  EXPECT_EQ(mx[0], (std::uint64_t(1) << 63) + std::uint64_t(c.size() - 1));
  EXPECT_EQ(mx[1], 5u);
  EXPECT_EQ(mn[0], std::uint64_t(1) << 63);
  EXPECT_EQ(mn[1], 5u);
  std::vector<std::uint64_t> nb{big};
  c.iall_reduce(Span<std::uint64_t>(nb), ReduceOp::max).wait();
  EXPECT_EQ(nb[0], (std::uint64_t(1) << 63) + std::uint64_t(c.size() - 1));
  // Small on rank 0, past 2^63 elsewhere: a signed comparison takes 1 for the largest.
  std::vector<std::uint64_t> mixed{c.rank() == 0 ? 1u : big}, low{mixed[0]};
  c.all_reduce(Span<std::uint64_t>(mixed), ReduceOp::max);
  c.all_reduce(Span<std::uint64_t>(low), ReduceOp::min);
  if (c.size() > 1) {
    EXPECT_EQ(mixed[0], (std::uint64_t(1) << 63) + std::uint64_t(c.size() - 1));
    EXPECT_EQ(low[0], 1u);
  }
}

TEST_P(AnyComm, ReduceScatterGivesEachRankItsBlock) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int n = c.size(), r = c.rank(), per = 3;
  std::vector<float> in(static_cast<std::size_t>(n) * per);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = float(i + 100 * r);
  std::vector<float> out(per);
  c.reduce_scatter(Span<const float>(in), Span<float>(out));
  for (int j = 0; j < per; ++j) {
    EXPECT_EQ(out[j], float(n * (r * per + j) + 100 * n * (n - 1) / 2));
  }
}

TEST_P(AnyComm, AllGatherConcatenatesInRankOrder) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int n = c.size();
  const std::vector<std::int32_t> in{c.rank(), -c.rank()};
  std::vector<std::int32_t> out(2 * static_cast<std::size_t>(n));
  c.all_gather(Span<const std::int32_t>(in), Span<std::int32_t>(out));
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(out[2 * q], q);
    EXPECT_EQ(out[2 * q + 1], -q);
  }
}

TEST_P(AnyComm, BroadcastFromLastRank) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int root = c.size() - 1;
  std::vector<float> data(4, c.rank() == root ? 7.0f : -1.0f);
  c.broadcast(Span<float>(data), root);
  for (float v : data)
    EXPECT_EQ(v, 7.0f);
}

TEST_P(AnyComm, RingOfNonBlockingSendRecv) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int n = c.size(), r = c.rank();
  std::vector<float> out(3, float(r)), in(3, -1.0f);
  Request recv = c.irecv(Span<float>(in), (r + n - 1) % n, 5);
  Request send = c.isend(Span<const float>(out), (r + 1) % n, 5);
  send.wait();
  recv.wait();
  for (float v : in)
    EXPECT_EQ(v, float((r + n - 1) % n));
  // Blocking forms between ranks 0 and 1.
  if (n >= 2 && r < 2) {
    std::vector<std::uint8_t> b(2, std::uint8_t(r + 1));
    if (r == 0) {
      c.send(Span<const std::uint8_t>(b), 1, 9);
    } else {
      c.recv(Span<std::uint8_t>(b), 0, 9);
      EXPECT_EQ(b[0], 1);
    }
  }
}

TEST_P(AnyComm, NonBlockingCollectivesCompleteByTestOrWait) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  std::vector<float> a(16, 1.0f), b(16, 2.0f);
  Request ra = c.iall_reduce(Span<float>(a));
  Request rb = c.iall_reduce(Span<float>(b), ReduceOp::max);
  while (!ra.test()) {}
  rb.wait();
  EXPECT_TRUE(rb.test());
  for (float v : a)
    EXPECT_EQ(v, float(c.size()));
  for (float v : b)
    EXPECT_EQ(v, 2.0f);
  {
    // A request released unwaited completes in its destructor.
    std::vector<float> g(static_cast<std::size_t>(c.size()));
    std::vector<float> one{float(c.rank())};
    Request rg = c.iall_gather(Span<const float>(one), Span<float>(g));
    Request moved = std::move(rg);
    moved = c.ibroadcast(Span<float>(one), 0); // completes the gather first
    moved.wait();
    EXPECT_EQ(g.back(), float(c.size() - 1));
  }
}

// A Request an error unwinds past is abandoned, not waited for: the peer may be waiting for
// this rank in turn. One made and released while the error unwinds (in a destructor) is not.
TEST_P(AnyComm, AnErrorAbandonsTheTransfersItUnwindsPast) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  const int n = c.size(), r = c.rank();
  const std::size_t before = abandoned_transfers();
  std::vector<float> never(4, -1.0f);
  // No rank sends tag 77: waiting for this receive would never end.
  EXPECT_THROW(
      {
        Request pending = c.irecv(Span<float>(never), (r + 1) % n, 77);
        throw Error("an error with a receive in flight");
      },
      Error);
  const std::size_t abandoned = abandoned_transfers(); // the staged one's MPI request too
  EXPECT_GT(abandoned, before);
  EXPECT_EQ(never[0], -1.0f);

  struct ExchangesWhenDestroyed {
    Comm& c;
    std::vector<float>& got;
    ~ExchangesWhenDestroyed() {
      const std::vector<float> mine{float(c.rank())};
      Request recv = c.irecv(Span<float>(got), (c.rank() + c.size() - 1) % c.size(), 78);
      Request send = c.isend(Span<const float>(mine), (c.rank() + 1) % c.size(), 78);
    }
  };
  std::vector<float> got{-1.0f};
  const auto fail_before_exchange = [&] {
    ExchangesWhenDestroyed exchange{c, got};
    throw Error("an error before the exchange");
  };
  EXPECT_THROW(fail_before_exchange(), Error);
  EXPECT_EQ(got[0], float((r + n - 1) % n));
  EXPECT_EQ(abandoned_transfers(), abandoned);
}

TEST_P(AnyComm, MismatchedSizesAreRefusedBeforeSending) {
  const std::unique_ptr<Comm> owned = make();
  Comm& c = *owned;
  std::vector<float> in(c.size() * 2 + 1), out(2), small(1), big(c.size() * 3);
  EXPECT_THROW(c.reduce_scatter(Span<const float>(in), Span<float>(out)), Error);
  EXPECT_THROW(c.all_gather(Span<const float>(small), Span<float>(big)), Error);
  EXPECT_THROW(c.all_reduce(Span<const float>(small), Span<float>(out)), Error);
  EXPECT_THROW(c.send(Span<const float>(small), c.size()), Error);
  EXPECT_THROW(c.recv(Span<float>(small), -1), Error);
  EXPECT_THROW(c.broadcast(Span<float>(small), c.size()), Error);
  // Still usable afterwards: nothing was posted.
  std::vector<float> one{1.0f};
  c.all_reduce(Span<float>(one));
  EXPECT_EQ(one[0], float(c.size()));
}

// What the staged path copies: each operation's input bytes to the host and its output bytes
// back, once each; a broadcast only the root's in and only the others' back.
// The end of a group reports its error, unless an error from inside the group is already
// unwinding: that one reaches the caller (two at once would end the process in std::terminate).
TEST(Group, AnErrorInsideTheGroupIsTheOneReported) {
  FailingGroupEnd comm;
  try {
    Group group(comm);
    throw Error("an operation inside the group failed");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "an operation inside the group failed");
  }
  try {
    Group group(comm);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the group's end failed");
    return;
  }
  FAIL() << "the group's end did not report its error";
}

TEST(StagedComm, CopiesEachOperationsBytesOnceEachWay) {
  const auto copied = std::make_shared<Copied>();
  const std::unique_ptr<Comm> c = staged(copied);
  EXPECT_STREQ(c->backend(), "mpi-staged");
  const std::size_t n = std::size_t(c->size());
  std::vector<float> a(5, 1.0f), blocks(3 * n, 1.0f), block(3);
  c->all_reduce(Span<float>(a));
  EXPECT_EQ(copied->to_host, 5 * sizeof(float));
  EXPECT_EQ(copied->to_device, 5 * sizeof(float));
  *copied = {};
  c->reduce_scatter(Span<const float>(blocks), Span<float>(block));
  EXPECT_EQ(copied->to_host, 3 * n * sizeof(float));
  EXPECT_EQ(copied->to_device, 3 * sizeof(float));
  *copied = {};
  c->all_gather(Span<const float>(block), Span<float>(blocks));
  EXPECT_EQ(copied->to_host, 3 * sizeof(float));
  EXPECT_EQ(copied->to_device, 3 * n * sizeof(float));
  *copied = {};
  c->broadcast(Span<float>(a), 0);
  EXPECT_EQ(copied->to_host, c->rank() == 0 ? 5 * sizeof(float) : 0);
  EXPECT_EQ(copied->to_device, c->rank() == 0 ? 0 : 5 * sizeof(float));
  // A non-blocking result arrives in the caller's buffer only when the request completes.
  *copied = {};
  std::vector<float> b(4, 1.0f);
  Request r = c->iall_reduce(Span<float>(b));
  r.wait();
  EXPECT_EQ(copied->to_device, 4 * sizeof(float));
  EXPECT_EQ(b[0], float(n));
}

// Host buffers are kept: the same operations again allocate nothing, a larger one allocates
// once, operations in flight together each get their own, and every buffer is released once.
TEST(StagedComm, ReusesItsHostBuffers) {
  struct Counts {
    int allocated = 0, released = 0;
  };
  const auto counts = std::make_shared<Counts>();
  StagingCopies copies{
      [](void* host, const void* device, std::size_t bytes) { std::memcpy(host, device, bytes); },
      [](void* device, const void* host, std::size_t bytes) { std::memcpy(device, host, bytes); },
      [counts](std::size_t bytes) {
        ++counts->allocated;
        return ::operator new(bytes);
      },
      [counts](void* host, std::size_t) {
        ++counts->released;
        ::operator delete(host);
      }};
  {
    StagedComm c(std::make_unique<MpiComm>(borrow_comm(MPI_COMM_WORLD)), std::move(copies));
    const float n = float(c.size());
    std::vector<float> small(16, 1.0f), large(64, 1.0f), other(16, 1.0f);
    for (int i = 0; i < 5; ++i) {
      std::fill(small.begin(), small.end(), 1.0f);
      c.all_reduce(Span<float>(small));
      EXPECT_EQ(small[0], n);
    }
    EXPECT_EQ(c.host_buffers_allocated(), 1u);
    c.all_reduce(Span<float>(large));
    EXPECT_EQ(c.host_buffers_allocated(), 2u);
    // Both in flight at once: the two kept buffers serve them.
    Request a = c.iall_reduce(Span<float>(small)), b = c.iall_reduce(Span<float>(other));
    a.wait();
    b.wait();
    EXPECT_EQ(c.host_buffers_allocated(), 2u);
    EXPECT_EQ(other[0], n);
    // A third at once needs a third buffer.
    Request d = c.iall_reduce(Span<float>(small)), e = c.iall_reduce(Span<float>(other));
    Request f = c.iall_reduce(Span<float>(large));
    d.wait();
    e.wait();
    f.wait();
    EXPECT_EQ(c.host_buffers_allocated(), 3u);
    EXPECT_EQ(counts->allocated, 3);
    EXPECT_EQ(counts->released, 0);
  }
  EXPECT_EQ(counts->released, 3);
}

TEST(MpiComm, CollectivesOnEachGridAxis) {
  const int world = test::world_size();
  for (const Layout& l : all_layouts(world)) {
    GridOptions o;
    o.layout = {l.dp, l.pp, l.tp};
    Grid g = Grid::create(MPI_COMM_WORLD, o);
    const int coord[3] = {g.coords().dp, g.coords().pp, g.coords().tp};
    const int extent[3] = {l.dp, l.pp, l.tp};
    for (Axis axis : {Axis::dp, Axis::pp, Axis::tp}) {
      auto comm = g.make_mpi_comm(axis);
      const int a = static_cast<int>(axis);
      ASSERT_EQ(comm->size(), extent[a]);
      EXPECT_EQ(comm->rank(), coord[a]);
      // Sum of world ranks along the axis: ranks differ by the axis stride.
      const int stride = axis == Axis::tp ? 1 : axis == Axis::pp ? l.tp : l.tp * l.pp;
      std::vector<std::int32_t> v{g.rank()};
      comm->all_reduce(Span<std::int32_t>(v));
      const int base = g.rank() - coord[a] * stride;
      EXPECT_EQ(v[0], extent[a] * base + stride * extent[a] * (extent[a] - 1) / 2)
          << l.str() << " axis " << axis_name(axis);
    }
  }
}
