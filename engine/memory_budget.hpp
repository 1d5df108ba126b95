// The memory a run will need per rank, estimated from its configuration before anything is
// allocated, and refused with the key to change when the node cannot hold it: a vocabulary or
// model far too large must not grow for minutes and die in std::bad_alloc.
#pragma once

#include <string>

#include "engine/run_config.hpp"
#include "parallel/grid.hpp"
#include "parallel/pipeline_plan.hpp"

namespace gridlm::engine {

// Bytes per rank of the layout's largest pipeline stage, counted as the start-up report counts
// them (the model's buffers planned by layers::GPT itself, the optimizer's and ZeRO-1's as the
// engine lays them out); not counted: the ~30 MiB each process of MPI, HDF5, Kokkos and BLAS
// holds, and on a GPU the CUDA context and the libraries' workspaces.
struct MemoryEstimate {
  double weights = 0;     // parameters, fp32
  double gradients = 0;   // their gradients, and ZeRO-1's reduce-scattered shard and pad
  double optimizer = 0;   // AdamW's two moments and decay flags (1/dp each under ZeRO-1)
  double activations = 0; // every activation slot, the logits, the backward's scratch, tokens
  double transfers = 0;   // stage transfers held at once, the tied embedding's exchange
  double total() const { return weights + gradients + optimizer + activations + transfers; }
  std::string largest; // the part that weighs most, with the keys that size it
};

// MemAvailable of /proc/meminfo in bytes, or 0 when it cannot be read (then nothing is refused).
double node_available_bytes();

// `nccl_transfers`: NCCL would carry the pipeline's transfers, in per-op groups where
// plan_pipeline proves them deadlock-free; else (and where it does not) MPI posts a step's
// receives up front, each holding a buffer from the step's start.
MemoryEstimate estimate_memory(const RunConfig& config, const parallel::Layout& layout,
                               bool nccl_transfers = false);
// The same with the stage transfers of `plan`, the run's pipeline plan (config's schedule,
// pp, grad_accum, chunks and eval_batches), already made: the planner's, made once per schedule.
MemoryEstimate estimate_memory(const RunConfig& config, const parallel::Layout& layout,
                               const parallel::PipelinePlan& plan);

// Collective over the grid: throws the same Error on every rank when the estimate exceeds what
// the node has available (MemAvailable) shared among its ranks. Host memory only: on a GPU build
// the model lives in device memory, which this does not measure.
void check_memory_fits(const RunConfig& config, const parallel::Grid& grid);

} // namespace gridlm::engine
