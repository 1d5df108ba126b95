// engine::JobControl: the end of the batch job, answered at step boundaries. After every step
// the ranks agree (one all-reduce of three integers) on what the job asks: a signal any rank
// received (engine/job_signals), or, on rank 0's clock, that the job's time limit
// (engine/job_deadline) is nearer than the exit margin, so that the run saves a checkpoint and
// stops while it still can even when no signal arrives. The margin is train.exit_margin_minutes,
// or by default what the run has measured: twice its slowest step, its slowest validation (one
// runs inside a step, before the step's end is answered; none before one is measured), twice
// its slowest save (before the first, 5 s plus the checkpoint's size at 100 MiB/s) and 10 s to
// exit. Before stopping
// for the time limit, rank 0 asks squeue again: a limit an administrator extended meanwhile
// lets the run go on in this job instead of stopping and waiting in the queue.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/run_config.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

class JobControl {
public:
  // Collective over the grid: rank 0 reads the job's end. `checkpoint_bytes`: the size of one
  // checkpoint, for the margin before the first save is measured.
  JobControl(const RunConfig& config, const parallel::Grid& grid, std::uint64_t checkpoint_bytes);

  struct Decision {
    bool save = false;  // save a checkpoint now
    bool stop = false;  // and end the run (the job is ending)
    std::string reason; // why, in words ("SIGUSR1", "the job's time limit in 40 s")
    std::string note;   // rank 0: news to print (the job's time limit was extended)
  };
  // Collective over the grid, after a step that took `step_seconds` to train; `save_seconds`
  // and `validation_seconds` are the times of a save and a validation this step made (0: none).
  Decision after_step(double step_seconds, double save_seconds, double validation_seconds = 0.0);
  // A save made after after_step (one a signal asked for) took `seconds`: the margin counts it
  // like the step's own.
  void note_save(double seconds) { slowest_save_ = std::max(slowest_save_, seconds); }

  // For the start-up report (rank 0): when the job ends and the margin, or "" with no deadline.
  std::string describe() const;

private:
  double margin() const; // seconds
  // Rank 0, the time limit within the margin and the time the question may take: asks Slurm
  // again, once for each end it knows, in case the limit was extended (or lifted) while the job
  // ran; moves deadline_ if so and returns what to say.
  std::string look_again();
  static constexpr double squeue_seconds = 20.0; // the most that question may take
  const parallel::Grid& grid_;
  double margin_minutes_ = -1.0; // train.exit_margin_minutes; < 0: measured
  double deadline_ = -1.0;       // rank 0: steady_seconds() when the job ends; < 0: none
  std::string source_;           // where the deadline came from
  bool looked_again_ = false;    // rank 0: Slurm asked again since deadline_ was last set
  double first_save_guess_ = 0.0, slowest_step_ = 0.0, slowest_save_ = 0.0;
  double slowest_validation_ = 0.0;
  int eval_every_ = 0;        // train.eval_every (0: no validation)
  double squeue_wait_ = 20.0; // the most the start-up squeue may take
  int saves_answered_ = 0;    // SIGUSR2s answered: the largest count any rank had, agreed
};

} // namespace gridlm::engine
