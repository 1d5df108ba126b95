// Chrome-trace recording (`gridlm train --trace FILE`): each rank notes what it did when — the
// pipeline's F, B and W ops with their micro-batch and chunk, the time spent waiting for stage
// transfers, the gradient all-reduce and the optimizer — and rank 0 writes one JSON file with
// one track per rank that Perfetto (ui.perfetto.dev) and chrome://tracing open.
// Clocks are aligned by a barrier at start-up: good to the barrier's skew, microseconds here.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "parallel/grid.hpp"

namespace gridlm::parallel {

enum class TraceKind { forward, backward, weight, wait, grad_sync, optimizer };

// Seconds on the steady clock: the times add() takes.
double steady_seconds();

class TraceRecorder {
public:
  // Collective over grid (a barrier sets the common time origin). Records nothing when
  // `steps` is 0; otherwise the first `steps` training steps of this run (a resumed run's from
  // the step it resumed at).
  TraceRecorder(const Grid& grid, int steps);
  bool on() const { return step_ >= 0 && step_ - first_ < steps_; }
  void set_step(int step) {
    if (first_ < 0) first_ = step;
    step_ = step;
  }

  // An interval of this rank's time (steady_seconds()); micro and chunk -1 when not an op's.
  void add(TraceKind kind, double start, double end, int micro = -1, int chunk = -1);

  // Collective over the grid: rank 0 writes the JSON (through a .partial file renamed at the
  // end, so a failed write never leaves a broken trace behind).
  void write(const std::string& path) const;

private:
  const Grid& grid_;
  int steps_ = 0, step_ = -1, first_ = -1; // first_: the run's first step
  double origin_ = 0.0;
  std::vector<double> events_; // kind, step, micro, chunk, start, end per event
};

} // namespace gridlm::parallel
