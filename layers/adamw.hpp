// AdamW with decoupled weight decay on the flat parameter buffer, global-norm gradient clipping
// and the learning-rate schedule (linear warmup, then cosine decay to a floor).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <vector>

#include "layers/optimizer_config.hpp"
#include "layers/parameters.hpp"

namespace gridlm::layers {

// A run of `size` elements that AdamW updates: the parameters from flat offset `param`, the
// optimizer state (and the gradients update() is given) from offset `state`.
struct AdamWSegment {
  std::size_t param = 0, state = 0, size = 0;
};

class AdamW {
public:
  // The whole table, state at the parameters' offsets.
  AdamW(const OptimizerConfig& config, const ParamTable& table);
  // ZeRO-1: only `segments` (the parts of the buffer this replica owns; none for a replica that
  // owns nothing), in a state of `state_size` elements; state elements outside every segment
  // are padding that nothing reads.
  AdamW(const OptimizerConfig& config, const ParamTable& table,
        const std::vector<AdamWSegment>& segments, std::size_t state_size);

  // One update of params from grads (in the state layout) after `updates_done` earlier ones
  // (the moments' bias correction counts updates, not steps: a skipped step adds nothing to
  // them) with learning rate `lr`; `grad_norm` is the global norm of the gradients (over all
  // ranks), used for clipping. Moments live here.
  void update(Kokkos::View<float*> params, Kokkos::View<const float*> grads, int updates_done,
              double lr, double grad_norm);
  const std::vector<AdamWSegment>& segments() const { return segments_; }
  // The moments in the state layout (by default the parameter table's offsets).
  Kokkos::View<float*> moment1() const { return moment1_; }
  Kokkos::View<float*> moment2() const { return moment2_; }
  std::size_t state_bytes() const {
    return (moment1_.size() + moment2_.size()) * sizeof(float) + decays_.size();
  }

private:
  OptimizerConfig config_;
  std::vector<AdamWSegment> segments_;
  Kokkos::View<float*> moment1_, moment2_; // AdamW's m and v, [state size] each
  // Per element: 1 where weight decay applies. A byte, not the factor as a float: a quarter of
  // the optimizer's memory.
  Kokkos::View<std::uint8_t*> decays_;
};

// Sum of squares of a buffer (for the global gradient norm; callers reduce across ranks).
double sum_of_squares(Kokkos::View<const float*> data);
// The same over several ranges of `data` in one launch: [ranges[2r], ranges[2r + 1]) for each r,
// a team per range (its threads read neighbouring elements), the ranges' float sums added in
// double. For a GPU, where a launch and a wait per tensor cost more than the sums.
double sum_of_squares(const float* data, Kokkos::View<const long*> ranges);

} // namespace gridlm::layers
