// GRIDLM_FAULT (fault_injection.hpp): parsed once; checked on every send and step.
#include "parallel/fault_injection.hpp"

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <mpi.h>

#include "parallel/diagnostics.hpp"
#include "parallel/flight_recorder.hpp"

namespace gridlm::parallel::fault {
namespace {

enum class Kind { none, skip_send, hang, hang_in_save, nan_grad, loss_spike, error };

struct Fault {
  Kind kind = Kind::none;
  int step = 0;
  bool armed = false; // this rank is the one, and the fault has not happened yet
};

Fault& fault() {
  static Fault f;
  return f;
}

} // namespace

void configure_from_environment() {
  Fault& f = fault();
  f = Fault{};
  const char* text = std::getenv("GRIDLM_FAULT");
  if (text == nullptr || *text == '\0') return;
  // At most 9 digits: a number that fits an int.
  const std::regex form(
      R"((skip_send|hang_in_save|hang|nan_grad|loss_spike|error):([0-9]{1,9}):([0-9]{1,9}))");
  std::smatch m;
  const std::string value(text);
  if (!std::regex_match(value, m, form) || std::stoi(m[3]) < 1) {
    throw Error(
        fmt::format("GRIDLM_FAULT={}: expected KIND:RANK:STEP with KIND one of skip_send, hang, "
                    "hang_in_save, nan_grad, loss_spike, error and STEP from 1 (a test-only "
                    "switch; unset it for real "
                    "runs)",
                    value));
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  f.kind = m[1] == "hang"           ? Kind::hang
           : m[1] == "hang_in_save" ? Kind::hang_in_save
           : m[1] == "nan_grad"     ? Kind::nan_grad
           : m[1] == "loss_spike"   ? Kind::loss_spike
           : m[1] == "error"        ? Kind::error
                                    : Kind::skip_send;
  f.step = std::stoi(m[3]) - 1; // the recorder counts from 0
  f.armed = std::stoi(m[2]) == rank;
}

bool skip_this_send() {
  Fault& f = fault();
  if (!f.armed || f.kind != Kind::skip_send) return false;
  if (flight::current_step() < f.step) return false;
  f.armed = false;
  return true;
}

void hang_if_asked(int step) {
  Fault& f = fault();
  if (!f.armed || f.kind != Kind::hang || step != f.step) return;
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

void hang_in_save_if_asked(int steps_done) {
  Fault& f = fault();
  if (!f.armed || f.kind != Kind::hang_in_save || steps_done != f.step + 1) return;
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

bool nan_gradient_now(int step) {
  Fault& f = fault();
  if (!f.armed || f.kind != Kind::nan_grad || step != f.step) return false;
  f.armed = false;
  return true;
}

void error_if_asked() {
  Fault& f = fault();
  if (!f.armed || f.kind != Kind::error || flight::current_step() != f.step) return;
  f.armed = false;
  throw Error(fmt::format("an error injected by GRIDLM_FAULT in step {}, after this rank's first "
                          "backward op (a test-only switch; unset it for real runs)",
                          f.step + 1));
}

double loss_offset_now(int step) {
  Fault& f = fault();
  if (!f.armed || f.kind != Kind::loss_spike || step != f.step) return 0.0;
  f.armed = false;
  return 100.0;
}

} // namespace gridlm::parallel::fault
