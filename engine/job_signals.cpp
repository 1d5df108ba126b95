// Signal handlers that only record which signal came.
#include "engine/job_signals.hpp"

#include <csignal>
#include <initializer_list>

namespace gridlm::engine {
namespace {

volatile std::sig_atomic_t stop_signal = 0; // SIGUSR1 or SIGTERM, once received
// SIGUSR2s received, only ever increased by the handler: one arriving while take_job_signal()
// reads it is seen at the next call, not lost.
volatile std::sig_atomic_t saves_asked = 0;
std::sig_atomic_t saves_answered = 0;

extern "C" void on_job_signal(int signal) {
  if (signal == SIGUSR2) {
    saves_asked = saves_asked + 1;
    return;
  }
  stop_signal = signal;
}

} // namespace

void install_job_signals() {
  struct sigaction action {};
  action.sa_handler = on_job_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART; // a blocking call in progress goes on, it is not failed with EINTR
  for (int s : {SIGUSR1, SIGUSR2, SIGTERM})
    sigaction(s, &action, nullptr);
}

PendingSignal take_job_signal() {
  PendingSignal p;
  const std::sig_atomic_t asked = saves_asked;
  if (stop_signal != 0) {
    p = {SignalRequest::stop, stop_signal};
  } else if (asked != saves_answered) {
    p = {SignalRequest::save, SIGUSR2};
  }
  // A stop is kept until answered (the run ends); saves asked so far are answered by this one.
  saves_answered = asked;
  return p;
}

const char* signal_name(int signal) {
  switch (signal) {
  case SIGUSR1: return "SIGUSR1";
  case SIGUSR2: return "SIGUSR2";
  case SIGTERM: return "SIGTERM";
  default: return "a signal";
  }
}

} // namespace gridlm::engine
