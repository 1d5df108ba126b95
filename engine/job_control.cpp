// Agreeing on when to save and stop before the job ends.
#include "engine/job_control.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/job_deadline.hpp"
#include "engine/job_signals.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/trace.hpp"

namespace gridlm::engine {

JobControl::JobControl(const RunConfig& config, const parallel::Grid& grid,
                       std::uint64_t checkpoint_bytes)
    : grid_(grid), margin_minutes_(config.train.exit_margin_minutes),
      first_save_guess_(5.0 + double(checkpoint_bytes) / double(100 << 20)),
      eval_every_(config.train.eval_every) {
  // The other ranks wait for rank 0's squeue under the hang watchdog: half its patience at most.
  if (config.parallel.timeout_seconds > 0.0)
    squeue_wait_ = std::clamp(config.parallel.timeout_seconds / 2.0, 1.0, squeue_seconds);
  parallel::run_agreed(grid.comm(), [&] {
    if (grid.rank() != 0) return;
    if (const std::optional<JobDeadline> d = read_job_deadline(false, squeue_wait_)) {
      deadline_ = parallel::steady_seconds() + d->seconds_left;
      source_ = d->source;
      // A time limit within the margin: every job of the run, requeued ones too, would save
      // and stop after its first step, one step per job. (Time left within it at the start,
      // after a slow start, is one short job; the next has the whole limit.)
      if (d->limit_seconds > 0.0 && d->limit_seconds <= margin()) {
        throw Error(fmt::format(
            "the job's time limit of {:.0f} s is within the exit margin of {:.0f} s{}: every "
            "job of this run, requeued ones too, would save and stop after one step; give the "
            "job more time (sbatch --time){}",
            d->limit_seconds, margin(),
            margin_minutes_ >= 0.0 ? " (train.exit_margin_minutes)" : " (measured)",
            margin_minutes_ >= 0.0 ? ", or a smaller train.exit_margin_minutes" : ""));
      }
    }
  });
}

double JobControl::margin() const {
  if (margin_minutes_ >= 0.0) return margin_minutes_ * 60.0;
  const double save = slowest_save_ > 0.0 ? slowest_save_ : first_save_guess_;
  // A validation runs inside a step, before the step's end is answered: a stop must leave room
  // for one once one has been measured (a long one took a job 9 s past its limit before it
  // counted). Not guessed before: a guess from the warm-up step, counted on every step, could
  // stop every job after its first step.
  const double validation = eval_every_ > 0 ? slowest_validation_ : 0.0;
  return 2.0 * slowest_step_ + validation + 2.0 * save + 10.0;
}

JobControl::Decision JobControl::after_step(double step_seconds, double save_seconds,
                                            double validation_seconds) {
  slowest_step_ = std::max(slowest_step_, step_seconds);
  slowest_save_ = std::max(slowest_save_, save_seconds);
  slowest_validation_ = std::max(slowest_validation_, validation_seconds);
  // [a stop signal (0: none); the time limit is near; the SIGUSR2s received]: the maximum over
  // the ranks is one of the stop signals, and the most saves any rank was asked for.
  std::vector<int> mine{job_stop_signal(), 0, job_saves_asked()};
  double left = 0.0;
  std::string note;
  if (deadline_ >= 0.0 && !looked_again_ &&
      deadline_ - parallel::steady_seconds() <= margin() + squeue_seconds) {
    note = look_again();
  }
  if (deadline_ >= 0.0) {
    left = deadline_ - parallel::steady_seconds(); // after the question, which takes time
    mine[1] = left <= margin() ? 1 : 0;
  }
  std::vector<int> all = mine;
  parallel::MpiComm world(parallel::borrow_comm(grid_.comm()), "world");
  world.all_reduce(Span<int>(all), parallel::ReduceOp::max);
  Decision d;
  d.note = std::move(note);
  if (all[0] > 0) {
    d.save = d.stop = true;
    d.reason = signal_name(all[0]);
  } else if (all[2] > saves_answered_) {
    d.save = true;
    d.reason = signal_name(SIGUSR2);
  }
  saves_answered_ = all[2]; // answered now, or by the stop's save
  if (all[1] != 0) {
    d.save = d.stop = true;
    d.reason = grid_.rank() == 0 ? fmt::format("the job's time limit in {:.0f} s (margin {:.0f} s)",
                                               left, margin())
                                 : "the job's time limit";
  }
  return d;
}

std::string JobControl::look_again() {
  looked_again_ = true;
  const double was = deadline_ - parallel::steady_seconds();
  std::optional<JobDeadline> now;
  try {
    now = read_job_deadline(true, squeue_wait_);
  } catch (const std::exception&) {
    return ""; // an answer not understood now: the end known before stands
  }
  if (!now) return "";
  if (std::isinf(now->seconds_left)) {
    deadline_ = -1.0;
    return fmt::format("the job's time limit was lifted (UNLIMITED, from {}): the run goes on "
                       "to train.steps; signals still stop it",
                       now->source);
  }
  const double end = parallel::steady_seconds() + now->seconds_left;
  if (end <= deadline_ + 1.0) return "";
  deadline_ = end;
  looked_again_ = false;
  return fmt::format("the job's time limit was extended: it ends in {:.1f} min instead of {:.1f} "
                     "(from {}); the run goes on",
                     now->seconds_left / 60.0, was / 60.0, now->source);
}

std::string JobControl::describe() const {
  if (deadline_ < 0.0) return "";
  const double left = deadline_ - parallel::steady_seconds();
  const std::string margin_text =
      margin_minutes_ >= 0.0 ? fmt::format("{:.0f} s (train.exit_margin_minutes)", margin())
                             : fmt::format("measured, {:.0f} s before the first step", margin());
  return fmt::format("job ends in {:.1f} min (from {}); saves and stops when less than the exit "
                     "margin is left: {}",
                     left / 60.0, source_, margin_text);
}

} // namespace gridlm::engine
