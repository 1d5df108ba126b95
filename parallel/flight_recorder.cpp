// The flight recorder's ring (flight_recorder.hpp). One per process: the main thread writes,
// the watchdog thread reads, under one mutex.
#include "parallel/flight_recorder.hpp"

#include <algorithm>
#include <chrono>
#include <set>

namespace gridlm::parallel::flight {
namespace {

struct State {
  std::mutex mutex;
  std::array<Record, ring_size> ring{};
  std::map<std::uint64_t, Record> in_flight; // by seq, oldest first
  std::uint64_t next = 1;
  std::uint64_t waiting = 0; // seq of the operation waited on, 0 for none
  double wait_since = 0.0;
  Record wait_copy; // kept even when the ring overwrites the slot
  int step = -1;
  const char* phase = "";
  int micro = -1, chunk = -1;
  double phase_since = wall_seconds(); // before the first step: since the process began
  std::uint64_t activity = 0;
};

State& state() {
  static State s;
  return s;
}

Record* find_in_flight(State& s, std::uint64_t seq) {
  const auto it = s.in_flight.find(seq);
  return it == s.in_flight.end() ? nullptr : &it->second;
}

// A leak of never-completed operations must not grow the map without end.
void keep_in_flight(State& s, const Record& r) {
  if (s.in_flight.size() >= in_flight_limit) s.in_flight.erase(s.in_flight.begin());
  s.in_flight.emplace(r.seq, r);
}

Record* find(State& s, std::uint64_t seq) {
  Record& r = s.ring[seq % ring_size];
  return r.seq == seq ? &r : find_in_flight(s, seq);
}

} // namespace

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::uint64_t posted(Record r, bool waiting) {
  State& s = state();
  const double now = wall_seconds();
  std::lock_guard<std::mutex> lock(s.mutex);
  r.seq = s.next++;
  r.step = s.step;
  r.phase = s.phase;
  r.micro = s.micro;
  r.chunk = s.chunk;
  r.posted = now;
  r.completed = r.skipped ? now : -1.0;
  s.ring[r.seq % ring_size] = r;
  if (r.completed < 0.0 || r.skipped) keep_in_flight(s, r);
  ++s.activity;
  if (waiting && !r.skipped) {
    s.waiting = r.seq;
    s.wait_since = now;
    s.wait_copy = r;
  }
  return r.seq;
}

void wait_begins(std::uint64_t seq) {
  State& s = state();
  const double now = wall_seconds();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record* r = find(s, seq);
  if ((r != nullptr && r->completed >= 0.0) || s.waiting == seq || seq == 0 || seq >= s.next)
    return;
  s.waiting = seq;
  s.wait_since = now;
  if (r != nullptr) {
    s.wait_copy = *r;
  } else {
    s.wait_copy = Record{};
    s.wait_copy.seq = seq;
    s.wait_copy.op = "an operation no longer recorded";
  }
  ++s.activity;
}

void completed(std::uint64_t seq) {
  State& s = state();
  const double now = wall_seconds();
  std::lock_guard<std::mutex> lock(s.mutex);
  Record& r = s.ring[seq % ring_size];
  if (r.seq == seq && r.completed < 0.0) r.completed = now;
  s.in_flight.erase(seq);
  if (s.waiting == seq) s.waiting = 0;
  ++s.activity;
}

void set_step(int step) {
  State& s = state();
  const double now = wall_seconds();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.step = step;
  s.phase = "";
  s.micro = s.chunk = -1;
  s.phase_since = now;
  ++s.activity;
}

void set_phase(const char* phase, int micro, int chunk) {
  State& s = state();
  const double now = wall_seconds();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.phase = phase;
  s.micro = micro;
  s.chunk = chunk;
  s.phase_since = now;
  ++s.activity;
}

const char* label(const std::string& text) {
  // Node-based: the strings never move. A run adds one per file it opens (a checkpoint a save).
  static std::mutex mutex;
  static std::set<std::string> labels;
  const std::lock_guard<std::mutex> lock(mutex);
  return labels.insert(text).first->c_str();
}

Snapshot snapshot() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Snapshot out;
  const std::uint64_t first = s.next > ring_size ? s.next - ring_size : 1;
  for (std::uint64_t seq = first; seq < s.next; ++seq)
    out.recent.push_back(s.ring[seq % ring_size]);
  for (const auto& [seq, r] : s.in_flight)
    if (seq < first) out.earlier.push_back(r);
  out.waiting = s.waiting != 0;
  if (out.waiting) {
    const Record* r = find(s, s.waiting);
    out.wait = r != nullptr ? *r : s.wait_copy;
    out.wait_since = s.wait_since;
  }
  out.step = s.step;
  out.phase = s.phase;
  out.micro = s.micro;
  out.chunk = s.chunk;
  out.phase_since = s.phase_since;
  out.activity = s.activity;
  return out;
}

int current_step() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.step;
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.ring = {};
  s.in_flight.clear();
  s.next = 1;
  s.waiting = 0;
  s.step = -1;
  s.phase = "";
  s.micro = s.chunk = -1;
  s.phase_since = wall_seconds();
  s.activity = 0;
}

BlockingScope::BlockingScope(const char* op, const char* axis, std::size_t bytes,
                             std::shared_ptr<const std::vector<int>> members) {
  Record r;
  r.op = op;
  r.axis = axis;
  r.bytes = bytes;
  r.members = std::move(members);
  seq_ = posted(r, true);
}

BlockingScope::~BlockingScope() { completed(seq_); }

} // namespace gridlm::parallel::flight
