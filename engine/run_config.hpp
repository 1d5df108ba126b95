// The run configuration the engine takes: one plain struct per section of the TOML file (model,
// train, data, parallel, output), each field with its default and a one-line meaning. Parsing
// (TOML, --set) is app/config's; the engine sees only these values.
#pragma once

#include <cstdint>
#include <string>

#include "layers/model_config.hpp"
#include "layers/optimizer_config.hpp"

namespace gridlm::engine {

struct TrainConfig {
  int micro_batch = 8;            // sequences per micro-batch on each data-parallel replica
  int grad_accum = 1;             // micro-batches accumulated per optimizer step
  int steps = 100;                // optimizer steps
  long seed = 1234;               // seed of the initialisation
  std::string precision = "fp32"; // of the matrix products: fp32, or bf16 (fp32 accumulation)
  int log_every = 10;             // a readable line at steps 1, n, 2n, ... and the last
  int eval_every = 0;             // validation loss every this many steps and at the end (0: never)
  int eval_batches = 4;       // global batches in one validation (same samples: same global batch)
  double peak_gflops = 100.0; // per-rank peak FLOP/s (in GFLOP/s) that MFU is measured against
  double exit_margin_minutes =
      -1; // save and stop this long before the job's time limit (-1: measured)
  std::string on_nonfinite =
      "stop"; // a bad step (non-finite loss or norm, a spike): stop,
              // skip (drop its update) or rollback (to the newest checkpoint)
  double spike_threshold =
      0.0;                // a loss this many robust std devs above the median is a spike (0: off)
  int spike_window = 100; // updated steps whose losses the median and MAD are taken over
  int max_bad_steps = 10; // bad steps skip or rollback may answer in one run; then it stops
  std::string skip_steps = "";   // steps (from 1) whose batches are read and dropped: "41,90-95"
  layers::OptimizerConfig optim; // AdamW, clipping and schedule (keys under [train])
};

// Sequences per optimizer step over all replicas: micro_batch x grad_accum x dp.
inline std::int64_t global_batch(const TrainConfig& t, int dp) {
  return std::int64_t(t.micro_batch) * t.grad_accum * dp;
}

// Why a validation (train.eval_every) cannot run: each replica's first stage keeps its share
// of the validation's tokens (eval_batches x grad_accum x micro_batch x (seq_len + 1) x 4
// bytes), at most 1 GiB. "" when it fits or no validation runs. validate() and the layout
// planner both ask it, so the planner never picks a layout the configuration check refuses.
std::string validation_memory_problem(const TrainConfig& t, int seq_len);

struct DataConfig {
  std::string source = "synthetic"; // synthetic, or the path of a dataset file (prepare-data)
  long seed = 7;                    // seed of the synthetic language, or of the sample order
  // A resumed run whose dataset holds other token or document counts than when its checkpoint
  // was saved (remade at the same path): stop, or continue through the new order.
  std::string on_change = "stop";
};

struct ParallelConfig {
  std::string dp = "auto";              // data-parallel replicas, or auto
  std::string pp = "1";                 // pipeline stages, or auto
  std::string tp = "1";                 // tensor-parallel ranks per stage, or auto
  std::string profile = "";             // auto axes chosen by the planner from this profile
                                        // (or "measure": at start-up); "": fixed rules
  bool force_tp_across_nodes = false;   // allow a tensor group to span nodes
  std::string backend = "auto";         // collectives over: auto, mpi, mpi-staged or nccl
  std::string schedule = "1f1b";        // pipeline schedule: gpipe, 1f1b, interleaved-1f1b, zb-h1
  int chunks = 1;                       // model chunks per pipeline stage (interleaved-1f1b)
  std::string stage_layout = "uniform"; // blocks per virtual stage: uniform, balanced or "a,b,.."
  double grad_bucket_mb = 4.0; // dp gradient buckets (MiB), reduced during the backward (0: after)
  int zero = 0;                // ZeRO stage: 0 (every replica all optimizer state) or 1 (1/dp each)
  double timeout_seconds = 600; // a wait this long in one operation is a hang (0: no watchdog)
  std::string wait = "auto";    // waiting ranks: spin, yield, or auto (yield if oversubscribed)
};

struct OutputConfig {
  std::string dir = "gridlm-out";        // directory for metrics and weights; {job_id}: Slurm's
  std::string metrics = "metrics.jsonl"; // JSON lines, one per step, inside dir ("" for none)
  std::string weights =
      "model.h5";             // final weights (HDF5, names as PyTorch) inside dir ("" for none)
  std::string gradients = ""; // the first step's reduced gradients (HDF5, PyTorch names) in dir
  std::string reference_dump = ""; // testing: write initial weights, batches, step-0 gradients
  std::string trace = "";          // Chrome-trace JSON of the first trace_steps steps ("": none)
  int trace_steps = 3;             // steps the trace records
};

struct CheckpointConfig {
  std::string dir = "";       // checkpoint directory inside output.dir ("": no checkpoints)
  int every = 0;              // save every this many steps (0: only by time and at the end)
  double every_minutes = 0;   // save when this many minutes passed since the last save (0: off)
  int keep = 3;               // newest checkpoints kept; older ones go once a new one is complete
  std::string resume = "";    // a checkpoint to resume from, or "auto": the newest in dir, if any
  std::string init_from = ""; // weights (a checkpoint or weights file) to start from, at step 0
  std::string on_save_error =
      "stop"; // a failed save: stop, or continue (warn and go on; the last save must succeed)
  bool direct_io = true; // large contiguous shards with O_DIRECT, past the page cache
};

struct RunConfig {
  layers::ModelConfig model;
  TrainConfig train;
  DataConfig data;
  ParallelConfig parallel;
  OutputConfig output;
  CheckpointConfig checkpoint;
};

} // namespace gridlm::engine
