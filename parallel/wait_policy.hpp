// How a rank waits for MPI: spinning in MPI's progress loop (the fastest when every rank has a
// core of its own) or yielding its core between polls (when a node runs more ranks than it has
// cores, a spinning rank takes the core from the rank it waits for: an all-reduce of 1,024
// floats took 11.6 ms at 4 ranks on 2 cores spinning, 0.12 ms yielding; bench/wait_policy.sh
// has the training figures). Every rank of a job must wait the same way: under yield, blocking
// operations are posted non-blocking, and MPI never matches a blocking collective with a
// non-blocking one (mixing them hangs).
#pragma once

#include <mpi.h>

#include <string>

namespace gridlm::parallel {

enum class WaitPolicy { spin, yield };

// "spin" or "yield".
const char* to_string(WaitPolicy policy);

// The policy of this process (spin until set).
WaitPolicy wait_policy();
// For tests; a job sets its policy with set_job_wait_policy, which all ranks agree on.
void set_wait_policy(WaitPolicy policy);

// What the job's nodes give their ranks.
struct NodeCores {
  int ranks = 1;                // ranks on this rank's node
  int threads = 1;              // the threads they compute with, all together (ranks x threads)
  int cores = 1;                // logical CPUs in the union of their CPU affinity masks, at most
                                // the CPU quota (parallel/cpu_quota)
  int nodes = 1;                // nodes of the job
  int oversubscribed_nodes = 0; // nodes of the job with more threads than cores
  double quota = 0;             // this node's CPU quota, in CPUs (0: none)
  bool oversubscribed() const { return threads > cores; }
};
// Collective over `world`; `threads_per_rank`: the threads this rank computes with.
NodeCores node_cores(MPI_Comm world, int threads_per_rank = 1);

// The policy `setting` asks for on these nodes ("auto": yield when any node of the job is
// oversubscribed, "spin", "yield"). Throws gridlm::Error naming the key for anything else.
WaitPolicy wait_policy_for(const std::string& setting, const NodeCores& job);

// Collective over `world`: every rank chooses from `setting` and its nodes, the ranks agree (one
// that chose yield makes them all yield), and the policy is set. Throws before the agreement for
// a setting wait_policy_for refuses, so give every rank a setting validated beforehand.
WaitPolicy set_job_wait_policy(const std::string& setting, MPI_Comm world,
                               int threads_per_rank = 1);

// "waiting ranks yield their cores (parallel.wait = auto: 1 of 1 node(s) has more ranks than
// cores; this one 4 rank(s) on 2 core(s))", for the start-up report: the last choice made.
std::string describe_wait_policy();

// What a rank waits for. Ranks of a tensor- or data-parallel group compute the same op and wait
// for each other briefly; a pipeline stage waits for its neighbour's whole op (milliseconds to
// seconds).
enum class WaitFor { peers, neighbour_op };

// Completes `request`, an operation `what` ("MPI_Iallreduce") posted, under the process's policy.
// Under yield, a wait for a neighbour's op that has lasted 1 ms sleeps 500 us between polls:
// Linux's EEVDF scheduler still gives a rank that only yields about half of a core it shares
// with a computing rank (2 pipeline stages on one core: 144 ms a step against 75 ms for one
// rank alone). Measured with activations of up to 1.5 MB (MPICH ch4:ucx here completes one
// while its sender computes); a message whose protocol needs several polls ends up to a nap
// later per poll once its receiver sleeps.
void complete(MPI_Request& request, const char* what, WaitFor kind = WaitFor::peers);
// Under yield, how long a wait for a neighbour's op yields before it sleeps, and each sleep.
constexpr double neighbour_yield_seconds = 1e-3;
constexpr double neighbour_nap_seconds = 500e-6;

} // namespace gridlm::parallel
