// parallel/wait_policy: what the job's nodes give their ranks, the policy chosen from them and
// from parallel.wait, agreed by every rank, and that the runtime chose it before the first test.
// That operations give the same results under either policy is tested in test_comm (every
// operation, both policies); here, that a pipeline's wait sleeps through a neighbour's op.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/grid.hpp"
#include "parallel/wait_policy.hpp"

using namespace gridlm;
using namespace gridlm::parallel;

namespace {

// Restores the process's policy after a test that changes it.
class WaitPolicyTest : public testing::Test {
protected:
  void TearDown() override { set_wait_policy(saved_); }
  WaitPolicy saved_ = wait_policy();
};

int shared_memory_ranks() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

} // namespace

TEST(NodeCores, CountsTheNodesRanksAndTheCoresTheyMayUse) {
  const NodeCores node = node_cores(MPI_COMM_WORLD);
  EXPECT_EQ(node.ranks, shared_memory_ranks());
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  EXPECT_GE(node.cores, CPU_COUNT(&mine)); // the union holds this rank's own cores
  EXPECT_LE(node.cores, int(sysconf(_SC_NPROCESSORS_CONF)));
  EXPECT_EQ(node.oversubscribed(), node.ranks > node.cores);
  // Every rank of the job counts the same nodes; this one among them when oversubscribed.
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_GE(node.nodes, 1);
  EXPECT_LE(node.nodes, size);
  EXPECT_LE(node.oversubscribed_nodes, node.nodes);
  if (node.oversubscribed()) {
    EXPECT_GE(node.oversubscribed_nodes, 1);
  }
  int counts[2] = {node.nodes, node.oversubscribed_nodes}, low[2] = {0, 0};
  MPI_Allreduce(counts, low, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(low[0], node.nodes);
  EXPECT_EQ(low[1], node.oversubscribed_nodes);
}

TEST(NodeCores, ThreadsPerRankCountAgainstTheCores) {
  // More threads than a cpu_set_t can name CPUs (1,024): oversubscribed on any machine.
  const NodeCores many = node_cores(MPI_COMM_WORLD, 2000);
  EXPECT_EQ(many.threads, 2000 * many.ranks);
  EXPECT_TRUE(many.oversubscribed());
  EXPECT_EQ(many.oversubscribed_nodes, many.nodes);
  EXPECT_EQ(wait_policy_for("auto", many), WaitPolicy::yield);
  EXPECT_EQ(node_cores(MPI_COMM_WORLD).threads, many.ranks); // one thread per rank by default
}

TEST_F(WaitPolicyTest, TheReportCountsThreadsWhenRanksHaveSeveral) {
  EXPECT_EQ(set_job_wait_policy("auto", MPI_COMM_WORLD, 2000), WaitPolicy::yield);
  const NodeCores node = node_cores(MPI_COMM_WORLD);
  const std::string said = describe_wait_policy();
  EXPECT_NE(said.find(std::to_string(node.ranks) + " rank(s) computing with " +
                      std::to_string(2000 * node.ranks) + " thread(s) on "),
            std::string::npos)
      << said;
}

TEST(NodeCores, TheRuntimeChoseYieldExactlyWhenANodeIsOversubscribed) {
  // tests/main.cpp's MpiRuntime chose "auto" before any test; the suites that change the policy
  // restore it.
  const NodeCores node = node_cores(MPI_COMM_WORLD);
  EXPECT_EQ(wait_policy(), node.oversubscribed_nodes > 0 ? WaitPolicy::yield : WaitPolicy::spin)
      << node.ranks << " ranks on " << node.cores << " cores";
}

TEST(WaitPolicyFor, AutoYieldsWhenAnyNodeOfTheJobIsOversubscribed) {
  // {ranks, their threads, cores on this node, nodes, oversubscribed nodes}
  EXPECT_EQ(wait_policy_for("auto", NodeCores{4, 4, 2, 1, 1}), WaitPolicy::yield);
  // This node has a core per rank, another has not: all ranks must wait the same way.
  EXPECT_EQ(wait_policy_for("auto", NodeCores{2, 2, 4, 2, 1}), WaitPolicy::yield);
  EXPECT_EQ(wait_policy_for("auto", NodeCores{2, 2, 2, 2, 0}), WaitPolicy::spin);
  EXPECT_EQ(wait_policy_for("auto", NodeCores{1, 1, 64, 1, 0}), WaitPolicy::spin);
}

TEST(WaitPolicyFor, SpinAndYieldAreTakenAsSaid) {
  EXPECT_EQ(wait_policy_for("yield", NodeCores{1, 1, 64, 1, 0}), WaitPolicy::yield);
  EXPECT_EQ(wait_policy_for("spin", NodeCores{8, 8, 2, 1, 1}), WaitPolicy::spin);
}

TEST(WaitPolicyFor, AnUnknownSettingNamesTheKeyAndTheChoices) {
  try {
    wait_policy_for("sometimes", NodeCores{8, 8, 2, 1, 1});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("parallel.wait = \"sometimes\""), std::string::npos) << what;
    EXPECT_NE(what.find("\"spin\""), std::string::npos) << what;
  }
}

TEST_F(WaitPolicyTest, TheRanksOfAJobAgreeOnOnePolicy) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Only the last rank asks for yield (as a rank on the one oversubscribed node would): every
  // rank must yield, or blocking and non-blocking collectives would meet and hang.
  const WaitPolicy got = set_job_wait_policy(rank == size - 1 ? "yield" : "spin", MPI_COMM_WORLD);
  EXPECT_EQ(wait_policy(), got);
  // Checked on every rank with a blocking all-reduce (the same form whatever the policy) before
  // a collective that would hang if the ranks disagreed.
  const int yields = got == WaitPolicy::yield ? 1 : 0;
  int all_yield = 0;
  MPI_Allreduce(&yields, &all_yield, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  ASSERT_EQ(all_yield, 1) << "this rank: " << to_string(got);
  const std::string said = describe_wait_policy();
  EXPECT_NE(said.find("yield their cores"), std::string::npos) << said;
  EXPECT_EQ(said.find("another rank asked for yield") != std::string::npos, rank != size - 1)
      << said;
  // A collective in the agreed policy completes on every rank.
  MpiComm world(borrow_comm(MPI_COMM_WORLD));
  std::vector<int> v{1};
  world.all_reduce(Span<int>(v));
  EXPECT_EQ(v[0], size);
  EXPECT_EQ(set_job_wait_policy("spin", MPI_COMM_WORLD), WaitPolicy::spin);
  EXPECT_NE(describe_wait_policy().find("waiting ranks spin (parallel.wait = spin: "),
            std::string::npos)
      << describe_wait_policy();
}

namespace {

// A ring (a rank sends to itself at 1 rank): the receives are posted, then rank 0 sends
// `late_us` late, so its right neighbour's receive completes only by the polls of its wait.
struct RingWait {
  int received = -1, left = 0;
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  double wall = 0, cpu = 0; // seconds the receive took, and this thread's CPU time in it
  long wakes = 0;           // times this thread gave its core up in it (slept or yielded)
};

long voluntary_switches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}
RingWait late_ring(int tag, useconds_t late_us, WaitFor kind) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  RingWait r;
  r.left = (rank + size - 1) % size;
  // Started together, so that rank 0's delay is the whole of its neighbour's wait.
  MPI_Request barrier = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  complete(barrier, "MPI_Ibarrier");
  int sent = 1000 * tag + rank;
  MPI_Irecv(&r.received, 1, MPI_INT, r.left, tag, MPI_COMM_WORLD, &r.recv);
  if (rank == 0) usleep(late_us);
  MPI_Isend(&sent, 1, MPI_INT, (rank + 1) % size, tag, MPI_COMM_WORLD, &r.send);
  timespec cpu0{}, cpu1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  const long switches0 = voluntary_switches();
  const double wall0 = MPI_Wtime();
  complete(r.recv, "MPI_Irecv", kind);
  r.wall = MPI_Wtime() - wall0;
  r.wakes = voluntary_switches() - switches0;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  r.cpu = double(cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * double(cpu1.tv_nsec - cpu0.tv_nsec);
  complete(r.send, "MPI_Isend", kind);
  EXPECT_EQ(r.received, 1000 * tag + r.left);
  return r;
}

} // namespace

TEST_F(WaitPolicyTest, AYieldingWaitCompletesALateMessage) {
  set_wait_policy(WaitPolicy::yield);
  const RingWait r = late_ring(7, 50'000, WaitFor::peers);
  EXPECT_EQ(r.recv, MPI_REQUEST_NULL); // completed and freed
  EXPECT_EQ(r.send, MPI_REQUEST_NULL);
}

TEST_F(WaitPolicyTest, AWaitForANeighboursOpSleepsThroughIt) {
  set_wait_policy(WaitPolicy::yield);
  // Rank 0 sends 200 ms late: its right neighbour waits as a pipeline stage waits for the stage
  // before it, and after the first millisecond sleeps between polls instead of yielding, so it
  // uses little of its core (a yielding wait takes all of a free core, and about half of one it
  // shares with a computing rank).
  const RingWait r = late_ring(8, 200'000, WaitFor::neighbour_op);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1 && rank == 1) {
    ASSERT_GT(r.wall, 0.1) << "rank 1 waited for rank 0's late message";
    EXPECT_LT(r.cpu, 0.25 * r.wall)
        << "the waiting rank computed " << r.cpu << " s of " << r.wall << " s";
    // Each wake-up costs a rank computing on the same core two context switches: naps of 500 us
    // (100 us took 8-12% of it); a few yields in the first millisecond on top.
    EXPECT_LT(double(r.wakes), r.wall / 400e-6 + 50)
        << "the waiting rank woke " << r.wakes << " times in " << r.wall << " s";
  }
}

TEST(WaitFor, PipelineStagesWaitForTheirNeighboursOps) {
  EXPECT_EQ(axis_waits(Axis::pp), WaitFor::neighbour_op);
  EXPECT_EQ(axis_waits(Axis::tp), WaitFor::peers);
  EXPECT_EQ(axis_waits(Axis::dp), WaitFor::peers);
}
