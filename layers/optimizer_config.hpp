// The optimizer's configuration and learning-rate schedule: plain values with no Kokkos, so that
// host-only code (the configuration parser) can hold them.
#pragma once

#include <string>

namespace gridlm::layers {

struct OptimizerConfig {
  double lr = 1e-3;      // peak learning rate
  double min_lr = 1e-4;  // floor of the cosine decay
  int warmup_steps = 10; // linear warmup from lr/warmup_steps to lr
  int decay_steps =
      0; // 0-based step where the cosine reaches min_lr (0: train.steps, after the last)
  double beta1 = 0.9;                  // AdamW first-moment decay
  double beta2 = 0.95;                 // AdamW second-moment decay
  double eps = 1e-8;                   // AdamW denominator epsilon
  double weight_decay = 0.1;           // decoupled decay of matrices
  bool decay_embeddings = false;       // also decay token/position embeddings
  bool decay_norms_and_biases = false; // also decay LayerNorm parameters and biases
  double grad_clip = 1.0;              // clip the global gradient norm to this (0: no clipping)
};

// The configuration with decay_steps = 0 resolved to the run's `steps`; the run setup calls it
// once, so everything after sees the step at which the decay really ends.
OptimizerConfig resolve_decay(OptimizerConfig c, int steps);

// Learning rate at `step` (0-based). Throws gridlm::Error for decay_steps = 0 (unresolved).
double learning_rate(const OptimizerConfig& c, int step);

// For the start-up report, given a resolved configuration and the run's steps: what is odd about
// the schedule (a warmup past the decay's end: no cosine decay, and within the run's steps maybe
// not even lr), or "".
std::string schedule_note(const OptimizerConfig& c, int steps);

} // namespace gridlm::layers
