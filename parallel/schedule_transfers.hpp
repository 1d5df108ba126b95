// The messages of a pipeline schedule, as the executor posts them: what each op receives before
// it runs (an activation into F, a gradient into B) and sends after it, with the tags that pair
// them. Also the grouped plan NCCL needs, and its deadlock check.
//
// NCCL queues transfers on one in-order stream, and a send completes only when the peer has
// its matching receive running, so posting all receives of a step up front (what the MPI path
// does) would serialise into a deadlock. The grouped plan posts, before each op, one group of
// the previous op's sends and this op's receive (Megatron's send-forward-receive-backward
// pairing, generalised); check_grouped_transfers proves for a schedule that, when every group
// blocks until all of its transfers have met their peers' (a rendezvous), no stage waits
// forever.
#pragma once

#include <string>
#include <vector>

#include "parallel/schedule.hpp"

namespace gridlm::parallel {

struct OpTransfers {
  int recv_from = -1, recv_tag = -1; // stage and tag of the input it needs (-1: none)
  int send_to = -1, send_tag = -1;   // stage and tag of the output it sends (-1: none)
};

// A transfer between two ops on the same stage (interleaved chunks) is reported too, with the
// stage itself as the peer; the executor hands it over in memory.
OpTransfers op_transfers(const Schedule& s, int stage, const Op& op);
// A tag that no transfer of op_transfers(s, ...) uses (the tied-embedding gradient exchange).
int tied_embedding_tag(const Schedule& s);
// "" when every tag of `s` (transfers and tied embedding) is at most `tag_upper_bound` (the MPI's
// MPI_TAG_UB), else what to change.
std::string tag_problem(const Schedule& s, int tag_upper_bound);

struct GroupedTransfer {
  bool send = false;
  int peer = 0, tag = 0;
};
// Per stage, the groups in posting order: group i (i < ops) is posted before op i and holds the
// sends of op i - 1 and the receive of op i; the last group holds the last op's sends. Only
// transfers between different stages appear; empty groups are kept (they post nothing).
std::vector<std::vector<std::vector<GroupedTransfer>>> grouped_transfers(const Schedule& s);

// "" when the grouped plan cannot deadlock under rendezvous semantics, else the first stage
// that waits forever and on what.
std::string check_grouped_transfers(const Schedule& s);

// The most boundary tensors a stage of `s` holds at once, as the executor posts its transfers
// (up front, or `grouped`): receives posted and not yet consumed, hand-overs between chunks, and
// sends, each counted until the stage next waits for a receive (then NCCL's in-order stream has
// completed it; MPI has matched it against a receive posted up front, or soon will: a large
// message sent by rendezvous may be held until its receiver next enters MPI, so for MPI this is
// an estimate that a send held across a peer's op can exceed by a buffer or so).
int held_boundary_buffers(const Schedule& s, bool grouped);

} // namespace gridlm::parallel
