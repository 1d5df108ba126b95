// engine::StepGuard: whether a step's update may be applied. A non-finite loss or gradient
// norm on any rank, or a loss spike (far above the median of the recent losses, in robust
// standard deviations from their median absolute deviation), is agreed by every rank before
// the optimizer step, so that all ranks take the same branch of train.on_nonfinite (the
// trainer carries it out: stop, skip or rollback).
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/run_config.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

// The last `capacity` losses of updated steps, and their median and MAD.
class LossWindow {
public:
  explicit LossWindow(std::size_t capacity) : capacity_(capacity) {}
  // The loss of `step` (0-based), newer than every step in the window.
  void push(int step, double loss);
  // Drops the losses of `step` and later: a rollback undid them, and the steps run again.
  void forget_from(int step);
  // Losses the median and MAD are over: the newest `capacity`.
  std::size_t size() const { return std::min(values_.size(), capacity_); }
  double median() const;
  double mad() const; // median absolute deviation from the median

private:
  std::vector<double> losses() const; // the newest size(), oldest first
  std::size_t capacity_;
  std::deque<std::pair<int, double>> values_; // (step, loss), oldest first, up to 2 capacity
};

// Spike detection needs this many losses in the window before it judges.
constexpr std::size_t spike_min_losses = 10;

class StepGuard {
public:
  StepGuard(const TrainConfig& train, const parallel::Grid& grid);

  struct Verdict {
    bool bad = false;
    std::string what; // "the loss is nan", "a loss spike: ...", "" when fine
  };
  // Collective over the grid: every rank gets the same verdict, whatever it saw itself.
  Verdict check(double loss, double grad_norm) const;
  // The loss of `step`, whose update was applied, joins the window.
  void accept(int step, double loss) { window_.push(step, loss); }
  // After a rollback to the checkpoint of `step` steps: the undone steps' losses leave the window
  // (else they would count twice as the steps run again).
  void rolled_back_to(int step) { window_.forget_from(step); }

private:
  // This rank's own reading of the step: 0 fine, 1 spike, 2 non-finite gradient norm, 3
  // non-finite loss (the worst over ranks wins, so every rank names the same problem).
  int judge(double loss, double grad_norm) const;

  const parallel::Grid& grid_;
  double spike_threshold_;
  LossWindow window_;
};

// "3,7,10-12" (steps counted from 1) as 0-based steps {2, 6, 9, 10, 11}; "" is none. Throws
// gridlm::Error naming `key` and the form when the text is not such a list.
std::set<int> parse_step_list(const std::string& text, const std::string& key);

} // namespace gridlm::engine
