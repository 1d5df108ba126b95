// Terminal and log progress lines.
#include "app/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace gridlm::app {

std::string decimal_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

std::string short_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

Progress::Progress(std::string label, bool show, double every_seconds)
    : label_(std::move(label)), show_(show), tty_(show && isatty(fileno(stdout)) != 0),
      every_(every_seconds), start_(Clock::now()), last_(start_) {}

void Progress::update(double fraction, std::uint64_t bytes, std::uint64_t documents,
                      std::uint64_t tokens) {
  if (!show_) return;
  const Clock::time_point now = Clock::now();
  const double since_last = std::chrono::duration<double>(now - last_).count();
  if (since_last < (tty_ ? 0.2 : every_)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string eta = "--:--";
  if (fraction > 0.0 && fraction <= 1.0) {
    const long left = std::lround(elapsed * (1.0 - fraction) / fraction);
    eta = fmt::format("{}:{:02}", left / 60, left % 60);
  }
  std::string line = fmt::format("{}: {:5.1f}% | {} | {} documents", label_, 100.0 * fraction,
                                 decimal_bytes(double(bytes)), short_count(double(documents)));
  if (tokens > 0) {
    line += fmt::format(" | {} tokens | {} tokens/s", short_count(double(tokens)),
                        short_count(double(tokens) / elapsed));
  }
  line += " | ETA " + eta;
  if (tty_) {
    std::printf("\r\033[K%s", line.c_str());
    drawn_ = true;
  } else {
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

double Progress::finish() {
  if (drawn_) {
    std::printf("\r\033[K");
    std::fflush(stdout);
    drawn_ = false;
  }
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

} // namespace gridlm::app
