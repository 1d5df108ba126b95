// Waiting for MPI without taking the core from the rank being waited for.
#include "parallel/wait_policy.hpp"

#include <sched.h>

#include <atomic>

#include <fmt/format.h>

#include "parallel/mpi_check.hpp"

namespace gridlm::parallel {
namespace {

std::atomic<WaitPolicy> policy{WaitPolicy::spin};
std::string chosen_because = "parallel.wait not set"; // set with the policy, on the main thread

} // namespace

const char* to_string(WaitPolicy p) { return p == WaitPolicy::spin ? "spin" : "yield"; }

WaitPolicy wait_policy() { return policy.load(std::memory_order_relaxed); }

void set_wait_policy(WaitPolicy p) { policy.store(p, std::memory_order_relaxed); }

NodeCores node_cores(MPI_Comm world) {
  MPI_Comm node = MPI_COMM_NULL;
  int rank = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_rank(world, &rank));
  GRIDLM_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  NodeCores out;
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  CPU_ZERO(&all);
  // A process whose mask cannot be read counts as free to run anywhere: it cannot claim cores.
  const bool known = sched_getaffinity(0, sizeof(mine), &mine) == 0;
  const int known_here = known ? 1 : 0;
  int known_everywhere = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_size(node, &out.ranks));
  GRIDLM_MPI_CHECK(MPI_Allreduce(&known_here, &known_everywhere, 1, MPI_INT, MPI_MIN, node));
  GRIDLM_MPI_CHECK(MPI_Allreduce(&mine, &all, int(sizeof(cpu_set_t)), MPI_BYTE, MPI_BOR, node));
  GRIDLM_MPI_CHECK(MPI_Comm_free(&node));
  out.cores = known_everywhere ? CPU_COUNT(&all) : out.ranks;
  return out;
}

WaitPolicy choose_wait_policy(const std::string& setting, const NodeCores& node) {
  WaitPolicy p = WaitPolicy::spin;
  if (setting == "auto") {
    p = node.oversubscribed() ? WaitPolicy::yield : WaitPolicy::spin;
  } else if (setting == "yield") {
    p = WaitPolicy::yield;
  } else if (setting != "spin") {
    throw Error(fmt::format("parallel.wait = \"{}\": use \"auto\" (yield when a node runs more "
                            "ranks than it has cores), \"spin\" or \"yield\"",
                            setting));
  }
  set_wait_policy(p);
  chosen_because = fmt::format("parallel.wait = {}: {} rank(s) on a node of {} core(s)", setting,
                               node.ranks, node.cores);
  return p;
}

std::string describe_wait_policy() {
  return fmt::format("waiting ranks {} ({})",
                     wait_policy() == WaitPolicy::spin ? "spin" : "yield their cores",
                     chosen_because);
}

void complete(MPI_Request& request) {
  if (wait_policy() == WaitPolicy::spin) {
    GRIDLM_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    return;
  }
  // Only yielding, never sleeping: sleeps of 20 us to 1 ms between polls made tiny-model steps
  // at 4 and 8 ranks on 2 cores 1.4-2x slower than yields (each wake-up pre-empts a computing
  // rank, and a rendezvous message needs several polls).
  for (;;) {
    int done = 0;
    GRIDLM_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    sched_yield();
  }
}

} // namespace gridlm::parallel
