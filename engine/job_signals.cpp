// Signal handlers that only record which signal came.
#include "engine/job_signals.hpp"

#include <csignal>
#include <initializer_list>

namespace gridlm::engine {
namespace {

volatile std::sig_atomic_t stop_signal = 0; // SIGUSR1 or SIGTERM, once received
volatile std::sig_atomic_t save_signal = 0; // SIGUSR2, once received

extern "C" void on_job_signal(int signal) {
  if (signal == SIGUSR2) {
    save_signal = signal;
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
  if (stop_signal != 0) {
    p = {SignalRequest::stop, stop_signal};
  } else if (save_signal != 0) {
    p = {SignalRequest::save, save_signal};
  }
  // A stop is kept until answered (the run ends); a save is answered once per signal.
  save_signal = 0;
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
