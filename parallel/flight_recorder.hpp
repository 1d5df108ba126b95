// The flight recorder: every rank remembers its recent communication operations (what, on
// which axis, with which peer, how many bytes, which tag, in which step and schedule op) and
// which one it is waiting in, so that a hang can be explained after the fact (watchdog.hpp).
// parallel::Comm records every operation it posts; the executor and the trainer say where in
// the step the rank is. Cheap: a mutex, a fixed ring and a map of the operations in flight.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gridlm::parallel::flight {

// One operation as recorded. Strings are literals or the communicator's own (they outlive it).
struct Record {
  std::uint64_t seq = 0; // 1, 2, ... in the order posted (0: an empty slot)
  const char* op = "";   // "send", "recv", "all_reduce", ...
  const char* axis = ""; // "dp", "pp", "tp" or "world"
  int peer = -1;         // world rank of the peer (send, recv, broadcast root), else -1
  std::shared_ptr<const std::vector<int>> members; // world ranks of the communicator
  std::size_t bytes = 0;                           // payload
  int tag = -1;                                    // point-to-point tag, else -1
  int step = -1;           // training step when posted (-1: outside training)
  const char* phase = "";  // schedule op when posted ("F", "B", "W"; "after its ops" at the
                           // step's end; "" outside the schedule)
  int micro = -1;          // its micro-batch
  int chunk = -1;          // its model chunk
  double posted = 0.0;     // wall-clock seconds (system clock, comparable across hosts)
  double completed = -1.0; // wall-clock seconds, -1 while in flight
  bool skipped = false;    // not posted at all: fault injection (fault_injection.hpp)
};

// What the watchdog reads: a consistent copy.
struct Snapshot {
  std::vector<Record> recent;  // oldest first
  std::vector<Record> earlier; // still in flight (or dropped) but gone from the ring, oldest first
  bool waiting = false;        // the rank is blocked in `wait`
  Record wait;                 // the operation it waits for
  double wait_since = 0.0;     // wall-clock seconds
  int step = -1;               // the step it is in
  const char* phase = "";      // and the schedule op (or "after its ops")
  int micro = -1, chunk = -1;
  double phase_since = 0.0;   // wall-clock seconds: when it entered that step or op
  std::uint64_t activity = 0; // grows with every post, wait and completion
};

constexpr std::size_t ring_size = 64;
// Operations posted but not completed are also kept until they complete, so that a wait on a
// receive posted many operations ago is still seen: the pipeline posts a step's receives at its
// start, up to two per micro-batch and chunk (4096 micro-batches). Past this many (operations
// leaked, never completed) the oldest is forgotten.
constexpr std::size_t in_flight_limit = std::size_t(1) << 16;

// Seconds since the epoch, from the system clock (the watchdog compares ranks' times).
double wall_seconds();

// The operation is posted now; the returned handle completes it. A blocking operation waits
// at once (waiting = true).
std::uint64_t posted(Record r, bool waiting);
// The rank blocks on it / it is complete. A wait on a forgotten operation is still a wait (its
// record says only that); completing an unknown handle does nothing.
void wait_begins(std::uint64_t seq);
void completed(std::uint64_t seq);

// Where the rank is: the step, then the schedule op inside it.
void set_step(int step);
// `phase` must outlive the phase (a literal); micro and chunk -1 for a phase of no op.
void set_phase(const char* phase, int micro, int chunk);

// A lasting copy of `text` for a record's `axis` (a file's path, say): the same pointer for the
// same text, kept until the process ends (a record outlives the object it names).
const char* label(const std::string& text);

Snapshot snapshot();
int current_step();
// Forgets everything (tests).
void reset();

// RAII for code that calls MPI directly instead of through parallel::Comm: records a blocking
// operation for the scope's duration.
class BlockingScope {
public:
  // `members`: the world ranks of the communicator (null: not known), so that a hang report can
  // name the rank the others wait for.
  BlockingScope(const char* op, const char* axis, std::size_t bytes,
                std::shared_ptr<const std::vector<int>> members = nullptr);
  ~BlockingScope();
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;

private:
  std::uint64_t seq_;
};

} // namespace gridlm::parallel::flight
