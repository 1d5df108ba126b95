// engine::ReferenceDump (output.reference_dump, one rank only): everything the PyTorch
// reference test (tests/reference/torch_reference.py) needs to replay a run — the initial
// weights, every batch, the step-0 logits, loss and gradients, and each step's loss — written
// to one HDF5 file at the end of the run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/run_config.hpp"
#include "layers/gpt.hpp"

namespace gridlm::engine {

class ReferenceDump {
public:
  // `whole`: the run's one chunk, holding the whole model, already initialised; `optim` the
  // optimizer as the run resolved it (RunPlan::optim).
  ReferenceDump(const RunConfig& config, const layers::OptimizerConfig& optim, layers::GPT& whole);
  // Before step 0, micro-batch 0's tokens [B, T+1]: its logits and loss, from a forward of its
  // own (the step's forward turns the logits into their gradient).
  void first_forward(const std::vector<std::int32_t>& seq);
  // Every batch the run reads, in order.
  void batch(const std::vector<std::int32_t>& seq);
  // After a step's gradients are complete (step 0's are kept) and its loss known.
  void step(int step, double loss);
  void write(const std::string& path) const;

private:
  const RunConfig& config_;
  layers::OptimizerConfig optim_;
  layers::GPT& gpt_;
  std::vector<float> initial_params_;
  std::vector<std::int32_t> batches_; // [steps, accum, B, T+1]
  std::vector<float> logits_;         // [B, T, V] of step 0, micro-batch 0
  float first_loss_ = 0.0f;
  std::vector<float> step0_grads_;
  std::vector<float> losses_;
};

} // namespace gridlm::engine
