// Signal handlers that only record which signal came.
#include "engine/job_signals.hpp"

#include <atomic>
#include <csignal>
#include <initializer_list>

namespace gridlm::engine {
namespace {

// Lock-free atomics, not volatile sig_atomic_t: the kernel may run the handler on any thread
// (the batch feed's, the watchdog's), and the main thread reads what it wrote.
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler needs lock-free atomics");
std::atomic<int> stop_signal{0}; // SIGUSR1 or SIGTERM, once received
// SIGUSR2s received, only ever increased by the handler (the ranks agree on the largest count).
std::atomic<int> saves_asked{0};

extern "C" void on_job_signal(int signal) {
  if (signal == SIGUSR2) {
    saves_asked.fetch_add(1);
    return;
  }
  stop_signal.store(signal);
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

int job_stop_signal() { return stop_signal.load(); }

int job_saves_asked() { return saves_asked.load(); }

const char* signal_name(int signal) {
  switch (signal) {
  case SIGUSR1: return "SIGUSR1";
  case SIGUSR2: return "SIGUSR2";
  case SIGTERM: return "SIGTERM";
  default: return "a signal";
  }
}

} // namespace gridlm::engine
