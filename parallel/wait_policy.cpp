// Waiting for MPI without taking the core from the rank being waited for.
#include "parallel/wait_policy.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "parallel/cpu_quota.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::parallel {
namespace {

std::atomic<WaitPolicy> policy{WaitPolicy::spin};
// Set with the policy, on the main thread.
std::string chosen_because = "parallel.wait not set";
bool chosen_before_agreeing = false; // this rank's setting asked for spin, another's for yield

} // namespace

const char* to_string(WaitPolicy p) { return p == WaitPolicy::spin ? "spin" : "yield"; }

WaitPolicy wait_policy() { return policy.load(std::memory_order_relaxed); }

void set_wait_policy(WaitPolicy p) { policy.store(p, std::memory_order_relaxed); }

NodeCores node_cores(MPI_Comm world, int threads_per_rank) {
  MPI_Comm node = MPI_COMM_NULL;
  int rank = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_rank(world, &rank));
  GRIDLM_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  NodeCores out;
  cpu_set_t mine, all;
  CPU_ZERO(&all);
  // A rank whose mask cannot be read claims every CPU a mask can name, so that its node never
  // counts as oversubscribed by a guess (spinning: MPI's own behaviour).
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) std::memset(&mine, 0xff, sizeof(mine));
  int node_rank = 0;
  GRIDLM_MPI_CHECK(MPI_Comm_size(node, &out.ranks));
  GRIDLM_MPI_CHECK(MPI_Comm_rank(node, &node_rank));
  GRIDLM_MPI_CHECK(MPI_Allreduce(&threads_per_rank, &out.threads, 1, MPI_INT, MPI_SUM, node));
  GRIDLM_MPI_CHECK(MPI_Allreduce(&mine, &all, int(sizeof(cpu_set_t)), MPI_BYTE, MPI_BOR, node));
  out.cores = CPU_COUNT(&all);
  // A CPU quota caps them: the smallest of the node's ranks' (they share one container).
  const double mine_quota = cpu_quota();
  double node_quota = mine_quota > 0 ? mine_quota : std::numeric_limits<double>::max();
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &node_quota, 1, MPI_DOUBLE, MPI_MIN, node));
  if (node_quota < std::numeric_limits<double>::max()) {
    out.quota = node_quota;
    out.cores = std::min(out.cores, std::max(1, int(std::floor(node_quota))));
  }
  GRIDLM_MPI_CHECK(MPI_Comm_free(&node));
  // Each node counted once, by its first rank.
  int counts[2] = {node_rank == 0 ? 1 : 0, node_rank == 0 && out.oversubscribed() ? 1 : 0};
  GRIDLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, world));
  out.nodes = counts[0];
  out.oversubscribed_nodes = counts[1];
  return out;
}

WaitPolicy wait_policy_for(const std::string& setting, const NodeCores& job) {
  if (setting == "auto") return job.oversubscribed_nodes > 0 ? WaitPolicy::yield : WaitPolicy::spin;
  if (setting == "yield") return WaitPolicy::yield;
  if (setting == "spin") return WaitPolicy::spin;
  throw Error(fmt::format("parallel.wait = \"{}\": use \"auto\" (yield when a node runs more "
                          "ranks than it has cores), \"spin\" or \"yield\"",
                          setting));
}

WaitPolicy set_job_wait_policy(const std::string& setting, MPI_Comm world, int threads_per_rank) {
  const NodeCores job = node_cores(world, threads_per_rank);
  const int mine = int(wait_policy_for(setting, job));
  int agreed = 0;
  // A plain blocking all-reduce on every rank, whatever policy each had until now.
  GRIDLM_MPI_CHECK(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, world));
  const WaitPolicy p = static_cast<WaitPolicy>(agreed);
  set_wait_policy(p);
  chosen_because = fmt::format(
      "parallel.wait = {}: {} of {} node(s) {} more ranks than cores; "
      "this one {} rank(s){} on {} core(s){}",
      setting, job.oversubscribed_nodes, job.nodes, job.nodes == 1 ? "has" : "have", job.ranks,
      job.threads == job.ranks ? std::string()
                               : fmt::format(" computing with {} thread(s)", job.threads),
      job.cores, job.quota > 0 ? fmt::format(", CPU quota {:.1f}", job.quota) : "");
  chosen_before_agreeing = agreed != mine;
  return p;
}

std::string describe_wait_policy() {
  return fmt::format(
      "waiting ranks {} ({}{})", wait_policy() == WaitPolicy::spin ? "spin" : "yield their cores",
      chosen_because, chosen_before_agreeing ? "; another rank asked for yield" : "");
}

void complete(MPI_Request& request, const char* what, WaitFor kind) {
  // Errors name the operation waited for, not only the MPI_Wait or MPI_Test that saw them.
  const auto check = [what](int rc, const char* call) {
    if (rc != MPI_SUCCESS) {
      const std::string text = fmt::format("{} of {}", call, what);
      detail::throw_mpi_error(rc, text.c_str(), __FILE__, __LINE__);
    }
  };
  if (wait_policy() == WaitPolicy::spin) {
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    return;
  }
  // Peers only yield: sleeps of 20 us to 1 ms between polls made tiny-model steps at 4 and 8
  // ranks on 2 cores 1.4-2x slower than yields (each wake-up pre-empts a computing rank, and a
  // rendezvous message needs several polls). A neighbour's op is worth sleeping through once
  // the wait has outlasted a message's round trips. Each wake-up costs the rank computing on
  // that core about 14 us (a context switch each way, here): naps of 100 us took 10% of it
  // (small at 4 ranks on 2 cores 8-12% slower than with 500 us); naps of 2 ms, or growing
  // with the wait, end waits late (a rendezvous message needs several polls).
  const timespec nap{0, long(neighbour_nap_seconds * 1e9)};
  const double start = kind == WaitFor::neighbour_op ? MPI_Wtime() : 0.0;
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (kind == WaitFor::neighbour_op && MPI_Wtime() - start > neighbour_yield_seconds) {
      nanosleep(&nap, nullptr);
    } else {
      sched_yield();
    }
  }
}

} // namespace gridlm::parallel
