// Non-finite and spike detection, agreed over the grid (step_guard.hpp).
#include "engine/step_guard.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <vector>

#include <fmt/format.h>

#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

// A normal distribution's standard deviation is 1.4826 MADs.
constexpr double mad_to_sigma = 1.4826;

double median_of(std::vector<double> v) {
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + long(n / 2), v.end());
  const double upper = v[n / 2];
  if (n % 2 == 1) return upper;
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + long(n / 2)));
}

} // namespace

void LossWindow::push(int step, double loss) {
  values_.emplace_back(step, loss);
  // Twice the window is kept, so that after a rollback forgets the newest losses the older
  // ones fill the window again (a full window after a rollback of up to spike_window steps).
  if (values_.size() > 2 * capacity_) values_.pop_front();
}

void LossWindow::forget_from(int step) {
  while (!values_.empty() && values_.back().first >= step)
    values_.pop_back();
}

std::vector<double> LossWindow::losses() const {
  std::vector<double> out;
  for (auto it = values_.end() - long(size()); it != values_.end(); ++it)
    out.push_back(it->second);
  return out;
}

double LossWindow::median() const {
  if (values_.empty()) return std::nan("");
  return median_of(losses());
}

double LossWindow::mad() const {
  if (values_.empty()) return std::nan("");
  const double m = median();
  std::vector<double> dev = losses();
  for (double& d : dev)
    d = std::abs(d - m);
  return median_of(std::move(dev));
}

StepGuard::StepGuard(const TrainConfig& train, const parallel::Grid& grid)
    : grid_(grid), spike_threshold_(train.spike_threshold),
      window_(std::size_t(std::max(train.spike_window, 1))) {}

int StepGuard::judge(double loss, double grad_norm) const {
  if (!std::isfinite(loss)) return 3;
  if (!std::isfinite(grad_norm)) return 2;
  if (spike_threshold_ <= 0 || window_.size() < spike_min_losses) return 0;
  const double median = window_.median();
  // A floor, so that a window of equal losses does not call every rise a spike.
  const double sigma = std::max(mad_to_sigma * window_.mad(), 1e-3 * std::abs(median));
  return loss > median + spike_threshold_ * sigma ? 1 : 0;
}

StepGuard::Verdict StepGuard::check(double loss, double grad_norm) const {
  const int mine = judge(loss, grad_norm);
  // The worst reading over ranks, and the values behind it from a rank that saw it.
  std::vector<double> worst{double(mine)};
  parallel::MpiComm all(parallel::borrow_comm(grid_.comm()));
  all.all_reduce(Span<double>(worst), parallel::ReduceOp::max);
  const int verdict = int(worst[0]);
  if (verdict == 0) return {};
  // The lowest rank that saw it says what it saw (values differ between ranks only when the
  // fault is local, as with an injected one).
  std::vector<int> who{mine == verdict ? grid_.rank() : grid_.size()};
  all.all_reduce(Span<int>(who), parallel::ReduceOp::min);
  std::vector<double> seen{loss, grad_norm, window_.median(), window_.mad()};
  all.broadcast(Span<double>(seen), who[0]);
  Verdict v;
  v.bad = true;
  if (verdict == 3) {
    v.what = fmt::format("the loss is {} (rank {})", seen[0], who[0]);
  } else if (verdict == 2) {
    v.what = fmt::format("the gradient norm is {} (rank {})", seen[1], who[0]);
  } else {
    v.what = fmt::format("a loss spike: {:.4f} against a median of {:.4f} over the last {} "
                         "steps (MAD {:.4f}; train.spike_threshold = {:g})",
                         seen[0], seen[2], window_.size(), seen[3], spike_threshold_);
  }
  return v;
}

std::set<int> parse_step_list(const std::string& text, const std::string& key) {
  std::set<int> steps;
  if (text.empty()) return steps;
  const std::regex item(R"(\s*([0-9]{1,9})\s*(?:-\s*([0-9]{1,9})\s*)?)");
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string part = text.substr(begin, end - begin);
    std::smatch m;
    const int first = std::regex_match(part, m, item) ? std::stoi(m[1]) : 0;
    const int last = m.size() > 2 && m[2].matched ? std::stoi(m[2]) : first;
    if (first < 1 || last < first || last - first > 1000000) {
      throw Error(fmt::format("{} = \"{}\": '{}' is not a step or a range of steps; give steps "
                              "counted from 1, separated by commas, such as \"40001,40100-40120\"",
                              key, text, part));
    }
    for (int s = first; s <= last; ++s)
      steps.insert(s - 1);
    begin = end + 1;
  }
  return steps;
}

} // namespace gridlm::engine
