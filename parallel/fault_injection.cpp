// GRIDLM_FAULT (fault_injection.hpp): parsed once; checked on every send and step.
#include "parallel/fault_injection.hpp"

#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

std::vector<Fault>& faults() {
  static std::vector<Fault> f;
  return f;
}

// The armed fault of `kind` that `at` accepts (its step), or null.
template <class At>
Fault* armed(Kind kind, At at) {
  for (Fault& f : faults()) {
    if (f.armed && f.kind == kind && at(f.step)) return &f;
  }
  return nullptr;
}

} // namespace

void configure_from_environment() {
  faults().clear();
  const char* text = std::getenv("GRIDLM_FAULT");
  if (text == nullptr || *text == '\0') return;
  // At most 9 digits: a number that fits an int.
  const std::regex form(
      R"((skip_send|hang_in_save|hang|nan_grad|loss_spike|error):([0-9]{1,9}):([0-9]{1,9}))");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string value(text);
  std::stringstream items(value);
  std::string item;
  // A trailing comma (an empty last item, which getline drops) is malformed too.
  const bool trailing = value.back() == ',';
  while (std::getline(items, item, ',')) {
    std::smatch m;
    if (trailing || !std::regex_match(item, m, form) || std::stoi(m[3]) < 1) {
      throw Error(fmt::format(
          "GRIDLM_FAULT={}: expected KIND:RANK:STEP (or several, separated by commas) with KIND "
          "one of skip_send, hang, hang_in_save, nan_grad, loss_spike, error and STEP from 1 (a "
          "test-only switch; unset it for real runs)",
          value));
    }
    Fault f;
    f.kind = m[1] == "hang"           ? Kind::hang
             : m[1] == "hang_in_save" ? Kind::hang_in_save
             : m[1] == "nan_grad"     ? Kind::nan_grad
             : m[1] == "loss_spike"   ? Kind::loss_spike
             : m[1] == "error"        ? Kind::error
                                      : Kind::skip_send;
    f.step = std::stoi(m[3]) - 1; // the recorder counts from 0
    f.armed = std::stoi(m[2]) == rank;
    faults().push_back(f);
  }
}

bool skip_this_send() {
  Fault* f = armed(Kind::skip_send, [](int step) { return flight::current_step() >= step; });
  if (f == nullptr) return false;
  f->armed = false;
  return true;
}

void hang_if_asked(int step) {
  if (armed(Kind::hang, [&](int s) { return s == step; }) == nullptr) return;
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

void hang_in_save_if_asked(int steps_done) {
  if (armed(Kind::hang_in_save, [&](int s) { return s + 1 == steps_done; }) == nullptr) return;
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

bool nan_gradient_now(int step) {
  Fault* f = armed(Kind::nan_grad, [&](int s) { return s == step; });
  if (f == nullptr) return false;
  f->armed = false;
  return true;
}

void error_if_asked() {
  Fault* f = armed(Kind::error, [](int s) { return flight::current_step() == s; });
  if (f == nullptr) return;
  f->armed = false;
  throw Error(fmt::format("an error injected by GRIDLM_FAULT in step {}, after this rank's first "
                          "backward op (a test-only switch; unset it for real runs)",
                          f->step + 1));
}

double loss_offset_now(int step) {
  Fault* f = armed(Kind::loss_spike, [&](int s) { return s == step; });
  if (f == nullptr) return 0.0;
  f->armed = false;
  return 100.0;
}

} // namespace gridlm::parallel::fault
