// AdamW with decoupled weight decay on the flat parameter buffer, global-norm gradient clipping
// and the learning-rate schedule (linear warmup, then cosine decay to a floor).
#pragma once

#include <Kokkos_Core.hpp>

#include "layers/optimizer_config.hpp"
#include "layers/parameters.hpp"

namespace gridlm::layers {

class AdamW {
public:
  AdamW(const OptimizerConfig& config, const ParamTable& table);

  // One update of params from grads at `step` (0-based) with learning rate `lr`; `grad_norm` is
  // the global norm of grads (over all ranks), used for clipping. Moments live here.
  void update(Kokkos::View<float*> params, Kokkos::View<const float*> grads, int step, double lr,
              double grad_norm);
  // The moments, at the parameter table's offsets (for checkpoints: saved and restored).
  Kokkos::View<float*> moment1() const { return moment1_; }
  Kokkos::View<float*> moment2() const { return moment2_; }
  std::size_t state_bytes() const {
    return (moment1_.size() + moment2_.size() + decay_.size()) * sizeof(float);
  }

private:
  OptimizerConfig config_;
  Kokkos::View<float*> moment1_, moment2_; // AdamW's m and v, [table.total] each
  Kokkos::View<float*> decay_; // per element: the weight decay factor (0 where none applies)
};

// Sum of squares of a buffer (for the global gradient norm; callers reduce across ranks).
double sum_of_squares(Kokkos::View<const float*> data);

} // namespace gridlm::layers
