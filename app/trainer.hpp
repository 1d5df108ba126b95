// The training loop over a built grid: data, model, optimizer, gradient all-reduce over the
// data-parallel axis, metrics, the memory report, final weights and the reference dump.
#pragma once

#include <utility>
#include <vector>

#include "app/config.hpp"
#include "parallel/grid.hpp"

namespace gridlm::app {

// Result of a run, for tests and the caller's summary.
struct TrainResult {
  double first_loss = 0.0;
  double last_loss = 0.0;
  double tokens_per_s = 0.0;  // median over logged steps after the first
  std::vector<double> losses; // every step's loss (mean over micro-batches and replicas)
  std::vector<std::pair<int, double>> val_losses; // (step, validation loss) when evaluated
};

// Collective over the grid. The configuration must be validated.
TrainResult train(const RunConfig& config, const parallel::Grid& grid);

} // namespace gridlm::app
