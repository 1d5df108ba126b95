// AdamW with decoupled weight decay on the flat parameter buffer, global-norm gradient clipping
// and the learning-rate schedule (linear warmup, then cosine decay to a floor).
#pragma once

#include <Kokkos_Core.hpp>

#include "layers/parameters.hpp"

namespace gridlm::layers {

struct OptimizerConfig {
  double lr = 1e-3;              // peak learning rate
  double min_lr = 1e-4;          // floor of the cosine decay
  int warmup_steps = 10;         // linear warmup from lr/warmup_steps to lr
  int total_steps = 0;           // the cosine reaches min_lr here (0: the last step of the run)
  double beta1 = 0.9;            // AdamW first-moment decay
  double beta2 = 0.95;           // AdamW second-moment decay
  double eps = 1e-8;             // AdamW denominator epsilon
  double weight_decay = 0.1;     // decoupled decay of matrices
  bool decay_embeddings = false; // also decay token/position embeddings
  bool decay_norms_and_biases = false; // also decay LayerNorm parameters and biases
  double grad_clip = 1.0;              // clip the global gradient norm to this (0: no clipping)
};

// Learning rate at `step` (0-based).
double learning_rate(const OptimizerConfig& c, int step);

class AdamW {
public:
  AdamW(const OptimizerConfig& config, const ParamTable& table);

  // One update of params from grads at `step` (0-based) with learning rate `lr`; `grad_norm` is
  // the global norm of grads (over all ranks), used for clipping. Moments live here.
  void update(Kokkos::View<float*> params, Kokkos::View<const float*> grads, int step, double lr,
              double grad_norm);
  std::size_t state_bytes() const {
    return (m_.size() + v_.size() + decay_.size()) * sizeof(float);
  }

private:
  OptimizerConfig config_;
  Kokkos::View<float*> m_, v_;
  Kokkos::View<float*> decay_; // per element: the weight decay factor (0 where none applies)
};

// Sum of squares of a buffer (for the global gradient norm; callers reduce across ranks).
double sum_of_squares(Kokkos::View<const float*> data);

} // namespace gridlm::layers
