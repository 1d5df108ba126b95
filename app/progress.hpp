// Progress of a long step (tokenizing a corpus), shown by rank 0: on a terminal one line
// rewritten in place a few times a second; elsewhere (a log file, a batch job's output) a plain
// line every few seconds, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gridlm::app {

class Progress {
public:
  // `show`: whether this process prints at all (rank 0). `every_seconds`: the period of plain
  // lines when the output is not a terminal.
  Progress(std::string label, bool show, double every_seconds);
  // `fraction` of the work done (0 to 1), and the counts so far.
  void update(double fraction, std::uint64_t bytes, std::uint64_t documents, std::uint64_t tokens);
  // Ends the terminal line; seconds since construction.
  double finish();

private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool show_, tty_;
  double every_;
  Clock::time_point start_, last_;
  bool drawn_ = false;
};

// "12.3 MB", "1.20 GB": decimal units, as file sizes and rates are usually quoted.
std::string decimal_bytes(double bytes);
// "1.23 M", "45.6 k": counts for progress lines.
std::string short_count(double n);

} // namespace gridlm::app
