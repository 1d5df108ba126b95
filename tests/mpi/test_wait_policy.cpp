// parallel/wait_policy: what a node gives its ranks, the policy chosen from it and from
// parallel.wait, and that the runtime chose it before the first test ran. That operations give
// the same results under either policy is tested in test_comm (every operation, both policies).
#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>

#include "parallel/diagnostics.hpp"
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
}

TEST(NodeCores, TheRuntimeChoseYieldExactlyWhenTheNodeIsOversubscribed) {
  // tests/main.cpp's MpiRuntime chose "auto" before any test; the suites that change the policy
  // restore it.
  const NodeCores node = node_cores(MPI_COMM_WORLD);
  EXPECT_EQ(wait_policy(), node.oversubscribed() ? WaitPolicy::yield : WaitPolicy::spin)
      << node.ranks << " ranks on " << node.cores << " cores";
}

TEST_F(WaitPolicyTest, AutoYieldsOnlyWhenRanksOutnumberCores) {
  EXPECT_EQ(choose_wait_policy("auto", NodeCores{4, 2}), WaitPolicy::yield);
  EXPECT_EQ(wait_policy(), WaitPolicy::yield);
  EXPECT_NE(describe_wait_policy().find("yield their cores"), std::string::npos);
  EXPECT_NE(describe_wait_policy().find("4 rank(s) on a node of 2 core(s)"), std::string::npos);
  EXPECT_EQ(choose_wait_policy("auto", NodeCores{2, 2}), WaitPolicy::spin);
  EXPECT_EQ(wait_policy(), WaitPolicy::spin);
  EXPECT_EQ(choose_wait_policy("auto", NodeCores{1, 64}), WaitPolicy::spin);
}

TEST_F(WaitPolicyTest, SpinAndYieldAreTakenAsSaid) {
  EXPECT_EQ(choose_wait_policy("yield", NodeCores{1, 64}), WaitPolicy::yield);
  EXPECT_EQ(choose_wait_policy("spin", NodeCores{8, 2}), WaitPolicy::spin);
  EXPECT_EQ(wait_policy(), WaitPolicy::spin);
}

TEST_F(WaitPolicyTest, AnUnknownSettingNamesTheKeyAndTheChoices) {
  set_wait_policy(WaitPolicy::yield);
  try {
    choose_wait_policy("sometimes", NodeCores{8, 2});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("parallel.wait = \"sometimes\""), std::string::npos) << what;
    EXPECT_NE(what.find("\"spin\""), std::string::npos) << what;
  }
  EXPECT_EQ(wait_policy(), WaitPolicy::yield); // unchanged by the refused setting
}

TEST_F(WaitPolicyTest, AYieldingWaitCompletesALateMessage) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  set_wait_policy(WaitPolicy::yield);
  // A ring (a rank sends to itself at 1 rank); the receives are posted, then rank 0 sends late,
  // so its right neighbour's receive completes only by the polls of a yielding wait.
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  int received = -1, sent = 1000 + rank;
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  MPI_Irecv(&received, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &recv);
  if (rank == 0) usleep(50'000);
  MPI_Isend(&sent, 1, MPI_INT, right, 7, MPI_COMM_WORLD, &send);
  complete(recv);
  complete(send);
  EXPECT_EQ(received, 1000 + left);
  EXPECT_EQ(recv, MPI_REQUEST_NULL); // completed and freed
  EXPECT_EQ(send, MPI_REQUEST_NULL);
}
