// The layout planner: every way of running a configuration on N ranks (dp x pp x tp with tensor
// groups inside a node, schedule, chunks, micro-batch size and count for the global batch,
// ZeRO), refused where the engine would refuse it or where it does not fit in memory, and
// ranked by predicted tokens/s. The prediction is the schedule simulator's makespan for the
// profiled op costs of each stage (its blocks, embedding and head), plus the communication the
// layout implies: stage transfers inside the simulation, the data-parallel reduction with the
// overlap the engine's buckets allow, the tied embedding's pipeline all-reduce, ZeRO-1's
// all-gather, the optimizer and the step's few scalar all-reduces. Memory per rank comes from
// engine/memory_budget, the estimate the engine itself refuses runs by.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/profile.hpp"
#include "engine/run_config.hpp"
#include "parallel/layout.hpp"

namespace gridlm::engine {

// One way to run: the keys the planner chooses.
struct Candidate {
  parallel::Layout layout;
  std::string schedule = "1f1b"; // parallel.schedule
  int chunks = 1;                // parallel.chunks
  int micro_batch = 1;           // train.micro_batch (sequences per micro-batch)
  int micro_batches = 1;         // train.grad_accum (micro-batches per step and replica)
  int zero = 0;                  // parallel.zero
  std::vector<int> stage_blocks; // blocks per virtual stage (parallel.stage_layout "balanced")
  // "--set parallel.dp=2 --set parallel.pp=1 ... --set train.micro_batch=4 ..." for gridlm train.
  std::string flags() const;
  // "dp 2 x pp 1 x tp 1, 1f1b, 4 x 2, zero 0"
  std::string str() const;
};

struct Prediction {
  double step_seconds = 0;       // one optimizer step
  double tokens_per_second = 0;  // the whole job's
  double bubble = 0;             // the simulated pipeline's idle fraction
  double memory_per_rank = 0;    // bytes, engine/memory_budget's estimate
  double pipeline_seconds = 0;   // the simulated schedule (compute and stage transfers)
  double dp_exposed_seconds = 0; // gradient reduction not hidden behind the backward
  double optimizer_seconds = 0;  // AdamW (and ZeRO-1's exposed all-gather)
};

// Pricing beyond what gridlm runs, to compare with published runs of other trainers.
struct PricingOptions {
  bool recompute = false; // full activation recomputation (Megatron's): the backward runs each
                          // block's forward again, and only each block's input is kept
};

// The configuration with the candidate's keys set.
RunConfig with_candidate(const RunConfig& config, const Candidate& c);

// "" when the engine would run the candidate on `ranks_per_node`-rank nodes and it fits in the
// profile's memory per rank; else the reason, from the engine's own checks.
std::string candidate_problem(const RunConfig& config, const Candidate& c, const Profile& machine,
                              const PricingOptions& pricing = {});

// Throws gridlm::Error when the profile cannot price the candidate (a tp or micro-batch size it
// did not measure, a model other than the one it measured).
Prediction predict(const RunConfig& config, const Candidate& c, const Profile& machine,
                   const PricingOptions& pricing = {});

struct PlanRequest {
  int ranks = 1;          // ranks of the job
  int ranks_per_node = 0; // 0: the profile's
  int global_batch = 0;   // sequences per optimizer step (0: what the configuration gives)
  PricingOptions pricing;
  std::optional<parallel::Layout> layout; // only this dp x pp x tp (none: every one)
  int max_micro_batch = 0;                // largest micro-batch size tried (0: any)
};

inline PlanRequest make_request(int ranks, int ranks_per_node, int global_batch) {
  PlanRequest r;
  r.ranks = ranks, r.ranks_per_node = ranks_per_node, r.global_batch = global_batch;
  return r;
}

struct Ranked {
  Candidate candidate;
  Prediction prediction;
};
// Candidates that lost for one reason.
struct Refusal {
  std::string reason;
  int count = 0;
  Candidate example;
};
struct PlanResult {
  int global_batch = 0;
  int ranks_per_node = 1;
  std::vector<Ranked> ranked;   // best first
  std::vector<Refusal> refused; // most common reason first
  int considered = 0;
  // What the prices leave out, in words ("" when nothing): a profile measured with one rank per
  // node knows no link inside a node, and prices it as free for nodes of more ranks.
  std::string caveat;
};

// The global batch a configuration asks for on `ranks` ranks: micro_batch x grad_accum x the dp
// its layout keys resolve to. Throws gridlm::Error when they cannot.
int configured_global_batch(const RunConfig& config, int ranks, int ranks_per_node);

// Throws gridlm::Error for a request that cannot be planned (no ranks, a profile of another
// model) naming the fix.
PlanResult plan_layouts(const RunConfig& config, const PlanRequest& request,
                        const Profile& machine);

} // namespace gridlm::engine
