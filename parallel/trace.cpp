// Chrome trace JSON: complete events ("ph": "X", microseconds) on one track per rank.
#include "parallel/trace.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/flight_recorder.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::parallel {
namespace {

constexpr int fields = 6;

const char* name_of(TraceKind k) {
  switch (k) {
  case TraceKind::forward: return "F";
  case TraceKind::backward: return "B";
  case TraceKind::weight: return "W";
  case TraceKind::wait: return "wait";
  case TraceKind::grad_sync: return "grad all-reduce";
  case TraceKind::optimizer: return "optimizer";
  }
  return "?";
}

// The world ranks of the grid's communicator, for the flight recorder's records.
std::shared_ptr<const std::vector<int>> members(const parallel::Grid& grid) {
  return std::make_shared<const std::vector<int>>(world_ranks(grid.comm()));
}

} // namespace

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

TraceRecorder::TraceRecorder(const parallel::Grid& grid, int steps) : grid_(grid), steps_(steps) {
  if (steps_ <= 0) return;
  {
    const flight::BlockingScope waited("barrier (trace start)", "world", 0, members(grid));
    GRIDLM_MPI_CHECK(MPI_Barrier(grid.comm()));
  }
  origin_ = steady_seconds();
}

void TraceRecorder::add(TraceKind kind, double start, double end, int micro, int chunk) {
  if (!on()) return;
  events_.insert(events_.end(), {double(kind), double(step_), double(micro), double(chunk),
                                 start - origin_, end - origin_});
}

void TraceRecorder::write(const std::string& path) const {
  if (steps_ <= 0) return;
  MPI_Comm comm = grid_.comm();
  const int n = grid_.size();
  // Each rank's block: its grid coordinates, then its events.
  const parallel::Coords c = grid_.coords();
  std::vector<double> mine{double(c.dp), double(c.pp), double(c.tp)};
  mine.insert(mine.end(), events_.begin(), events_.end());
  int count = int(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(n)), offsets(static_cast<std::size_t>(n), 0);
  std::vector<double> all;
  {
    // Recorded for the watchdog as one gather: a rank that never comes is named.
    const flight::BlockingScope waited("gather (trace)", "world", count * sizeof(double),
                                       members(grid_));
    GRIDLM_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
    for (int r = 1; r < n; ++r)
      offsets[std::size_t(r)] = offsets[std::size_t(r) - 1] + counts[std::size_t(r) - 1];
    all.resize(grid_.rank() == 0 ? std::size_t(offsets.back() + counts.back()) : 0);
    GRIDLM_MPI_CHECK(MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(),
                                 offsets.data(), MPI_DOUBLE, 0, comm));
  }
  if (grid_.rank() != 0) return;

  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < n; ++r) {
    const double* b = all.data() + offsets[std::size_t(r)];
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args",
                       {{"name", fmt::format("rank {} (dp {}, pp {}, tp {})", r, int(b[0]),
                                             int(b[1]), int(b[2]))}}}});
    for (int i = 3; i + fields <= counts[std::size_t(r)]; i += fields) {
      const auto kind = TraceKind(int(b[i]));
      const int step = int(b[i + 1]), micro = int(b[i + 2]), chunk = int(b[i + 3]);
      std::string name = name_of(kind);
      nlohmann::json args{{"step", step + 1}}; // counted from 1, as the log counts steps
      if (micro >= 0) {
        if (kind != TraceKind::wait) name += std::to_string(micro);
        args["micro_batch"] = micro;
        args["chunk"] = chunk;
        if (chunk > 0 && kind != TraceKind::wait) name += "." + std::to_string(chunk);
      }
      events.push_back({{"name", name},
                        {"cat", kind == TraceKind::wait ? "wait" : "compute"},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", b[i + 4] * 1e6},
                        {"dur", (b[i + 5] - b[i + 4]) * 1e6},
                        {"args", args}});
    }
  }
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    if (!out) abort_job(fmt::format("cannot write the trace file '{}'", partial));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) abort_job(fmt::format("cannot rename '{}' to '{}': {}", partial, path, ec.message()));
}

} // namespace gridlm::parallel
