// Pipeline schedules as data: a pure function (stages p, micro-batches m, chunks v, kind) gives
// each stage an ordered list of ops; a checker proves a schedule complete, ordered and free of
// deadlock; a simulator computes its timeline, bubble and activation memory for given costs.
// The executor (parallel/executor) runs these lists; nothing here talks to MPI.
//
// Model chunks: with v chunks per stage, stage s holds virtual stages s, s + p, ..., s + (v-1)p
// (Megatron's round-robin), so virtual stage q = c * p + s of chunk c runs on stage q % p.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace gridlm::parallel {

// forward_only: every micro-batch's forwards and no backward, for evaluation (not a training
// schedule: check_schedule refuses it; parse_schedule does not name it).
enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1, forward_only };
// F: forward; B: backward (input and weight gradients, or only the input gradient for zb-h1);
// W: weight gradient (zb-h1 only).
enum class OpKind { F, B, W };

struct Op {
  OpKind kind = OpKind::F;
  int micro = 0; // micro-batch
  int chunk = 0; // model chunk on this stage
  bool operator==(const Op& o) const {
    return kind == o.kind && micro == o.micro && chunk == o.chunk;
  }
};

// The most micro-batches a step (training or validation) may have. The pipeline's message tags
// number a step's micro-batches (parallel/schedule_transfers), so more would soon need tags
// beyond what some MPIs allow, and the schedule's checks grow with them.
constexpr int max_micro_batches = 4096;

struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int stages = 1;                   // p
  int micro_batches = 1;            // m
  int chunks = 1;                   // v, model chunks per stage
  std::vector<std::vector<Op>> ops; // ops[s]: stage s's list, in execution order
};

const char* schedule_name(ScheduleKind kind);
// "gpipe", "1f1b", "interleaved-1f1b", "zb-h1"; throws gridlm::Error listing them otherwise.
ScheduleKind parse_schedule(const std::string& name);
// "F3" / "B0.1" (micro-batch 0, chunk 1; chunk shown when v > 1)
std::string op_text(const Op& op, int chunks);

// Builds the schedule. Throws gridlm::Error for impossible parameters (p, m, v < 1; v > 1 for a
// kind without chunks; interleaved with m not a multiple of p).
Schedule make_schedule(ScheduleKind kind, int p, int m, int v = 1);

// Proves, by construction and by running all stages' lists together with messages buffered
// (non-blocking sends), that: every op of every micro-batch and chunk appears exactly once on
// its stage; each stage's ops of one micro-batch come in dependency order (F before B before
// W); every activation and gradient sent is received by the op that needs it; and the lists
// cannot deadlock. Returns "" when all holds, else the first problem found.
std::string check_schedule(const Schedule& s);

struct OpCosts {
  double forward = 1.0;  // F of one chunk of one micro-batch
  double backward = 2.0; // B (for zb-h1: the input-gradient part only)
  double weight = 0.0;   // W (zb-h1); for other kinds it is added to backward
  double transfer = 0.0; // sending an activation or gradient to the next stage
};

struct Timeline {
  struct Slot {
    Op op;
    double start = 0.0, end = 0.0;
  };
  std::vector<std::vector<Slot>> stages; // per stage, in execution order
  double makespan = 0.0;
  double bubble = 0.0;             // idle fraction of p x makespan
  std::vector<int> peak_in_flight; // per stage: micro-batch chunks with activations held
  // Per stage: the most micro-batches one of its chunks holds at once (each chunk has its own
  // activation slots, so this is what each needs; peak_in_flight counts all chunks together).
  std::vector<int> peak_per_chunk;
};

// Runs the lists with the given costs (an op starts when its stage is free and its inputs
// have arrived). The schedule must pass check_schedule.
Timeline simulate(const Schedule& s, const OpCosts& costs);
// The same with a cost per op on each stage (measured ones: a first stage with the embedding
// and a last with the head cost more); `transfer` is added to every message between stages.
using OpCostFn = std::function<double(int stage, const Op& op)>;
Timeline simulate(const Schedule& s, const OpCostFn& cost, double transfer);

// Stages whose ranks share a node's cores. Where more threads compute at once than the node has
// cores, the operating system shares the cores fairly and a waiting rank yields its core
// (parallel.wait): a stage computing runs at cores / (threads computing) of its speed alone,
// and faster again when the stages beside it wait. A stage that has waited longer than
// yield_for sleeps between polls and sees its input `wake` seconds late.
struct CoreSharing {
  double cores = 0;                    // per node
  double threads_per_rank = 1;         // compute threads of each rank
  std::vector<std::vector<int>> ranks; // ranks[stage][node]: the stage's ranks on each node
                                       // (all its data-parallel replicas, which run alike)
  double yield_for = 0;                // seconds a waiting stage yields before it sleeps
  double wake = 0;                     // seconds late an input reaches a sleeping stage
};
// The same with `cost` the seconds of an op with a core per thread: each op's progress is
// shared out by `sharing` as stages start and stop computing (a processor-sharing simulation).
// With cores to spare it gives what simulate(s, cost, transfer) gives.
Timeline simulate(const Schedule& s, const OpCostFn& cost, double transfer,
                  const CoreSharing& sharing);

} // namespace gridlm::parallel
