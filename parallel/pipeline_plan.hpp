// parallel::PipelinePlan: everything about running a schedule that can be decided before the
// first step, decided once — the forward-only schedule for validation, how stage transfers are
// posted (and, for NCCL's per-op groups, the proof that they cannot deadlock), whether the
// backward is split, and how many activation slots each stage needs. The executor runs a plan;
// the run's report reads the same plan.
#pragma once

#include <string>
#include <vector>

#include "parallel/schedule.hpp"

namespace gridlm::parallel {

// How stage transfers are posted.
enum class Transfers {
  up_front,          // every receive of a step at its start, each send after its op (MPI)
  grouped,           // before each op, one group of the previous op's sends and its receive
                     // (NCCL); refused unless proven deadlock-free for the schedules
  grouped_if_proven, // grouped where proven, else up front (PipelinePlan::transfers_note says why)
};

struct PipelinePlan {
  Schedule train;              // the training schedule
  Schedule eval;               // forward only over the validation micro-batches
  bool grouped = false;        // stage transfers in per-op groups; else posted up front
  std::string transfers_note;  // why grouped transfers were asked for but not used ("" if not)
  bool split_backward = false; // B and W run apart (zb-h1)
  std::vector<int>
      slots; // per stage: activation slots of each chunk, the most micro-batches one chunk holds
  int boundary_buffers = 0; // the most transfer buffers a stage holds (train or eval)
  Timeline uniform;         // the training schedule simulated with F = B = W = 1
};

// Micro-batches in one forward-only validation step for a training schedule: the largest divisor
// of its micro-batch count up to its virtual stages (at least 4). A validation runs global
// batches, each in micro-batch-count / this steps: enough micro-batches to fill the pipeline,
// and no more transfer buffers held than a training step (a forward-only schedule holds all of
// its sends under NCCL's groups).
int validation_micro_batches(const Schedule& train);

// Throws gridlm::Error (the same on every rank) for more than max_micro_batches micro-batches
// in either schedule, or for
// Transfers::grouped when the grouped plan of either schedule could deadlock.
PipelinePlan plan_pipeline(const Schedule& train, int eval_micro_batches, Transfers transfers);

} // namespace gridlm::parallel
