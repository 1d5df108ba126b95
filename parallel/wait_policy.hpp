// How a rank waits for MPI: spinning in MPI's progress loop (the fastest when every rank has a
// core of its own) or yielding its core between polls (when a node runs more ranks than it has
// cores, a spinning rank takes the core from the rank it waits for: an all-reduce of 1,024
// floats took 11.6 ms at 4 ranks on 2 cores spinning, 0.12 ms yielding).
#pragma once

#include <mpi.h>

#include <string>

namespace gridlm::parallel {

enum class WaitPolicy { spin, yield };

// "spin" or "yield".
const char* to_string(WaitPolicy policy);

// The policy of this process (spin until set).
WaitPolicy wait_policy();
void set_wait_policy(WaitPolicy policy);

// What a node gives its ranks: how many share it, and the cores they may run on (the union of
// their CPU affinity masks).
struct NodeCores {
  int ranks = 1;
  int cores = 1;
  bool oversubscribed() const { return ranks > cores; }
};
// Collective over `world`.
NodeCores node_cores(MPI_Comm world);

// Chooses the policy for `setting` ("auto": yield when the node is oversubscribed, "spin",
// "yield") and sets it. Throws gridlm::Error naming the key for anything else.
WaitPolicy choose_wait_policy(const std::string& setting, const NodeCores& node);

// "waiting ranks yield their cores (parallel.wait = auto: 4 ranks on a node of 2 cores)", for the
// start-up report: the last choice made.
std::string describe_wait_policy();

// Completes `request` under the process's policy.
void complete(MPI_Request& request);

} // namespace gridlm::parallel
