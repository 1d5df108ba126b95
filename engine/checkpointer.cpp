// Checkpoint cadence, `latest` and pruning.
#include "engine/checkpointer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/direct_file.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

// Rank 0: `latest` names `file`, replaced in one rename. The new name reaches the storage before
// the rename and the rename before the call returns, so that a node that crashes after a save
// leaves either `latest` as it was or `latest` complete, never an empty one (which XFS, or a
// Lustre client's cache, may otherwise leave behind).
void publish(const std::string& dir, const std::string& file) {
  const std::string latest = latest_file(dir), partial = latest + ".partial";
  const std::string text = std::filesystem::path(file).filename().string() + "\n";
  auto fail = [&](const std::string& what, const std::string& path) {
    throw Error(fmt::format("cannot {} '{}': {}; check that the checkpoint directory is writable "
                            "and its file system has room",
                            what, path, std::strerror(errno)));
  };
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("write", partial);
  const bool written = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  const bool synced = written && ::fsync(fd) == 0;
  if (::close(fd) != 0 || !synced) fail("write", partial);
  if (std::rename(partial.c_str(), latest.c_str()) != 0) fail("rename into place", latest);
  io::sync_directory(dir);
}

// The step of a checkpoint's file name step-N.h5, or -1 for any other name.
long checkpoint_step(const std::string& name) {
  const std::string prefix = "step-", suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stol(digits);
}

// Rank 0: removes complete checkpoints older than the newest `keep` up to `published`. The
// save has succeeded by then: a directory that cannot be listed leaves them, with a warning.
void prune(const std::string& dir, long published, int keep) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) {
    std::fprintf(stderr, "gridlm: warning: older checkpoints in '%s' not removed: %s\n",
                 dir.c_str(), ec.message().c_str());
    return;
  }
  for (const std::string& name : checkpoints_to_prune(names, published, keep))
    std::filesystem::remove(dir + "/" + name, ec);
}

} // namespace

std::vector<std::string> checkpoints_to_prune(const std::vector<std::string>& names, long published,
                                              int keep) {
  // By the number, not the name: from step 1,000,000 on a name has seven digits. Checkpoints
  // past the one just published belong to a run this one resumed from before them: they are
  // not this run's to remove.
  std::vector<std::pair<long, std::string>> older;
  for (const std::string& name : names) {
    const long step = checkpoint_step(name);
    if (step >= 0 && step <= published) older.emplace_back(step, name);
  }
  std::sort(older.begin(), older.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i + std::size_t(std::max(keep, 1)) < older.size(); ++i)
    out.push_back(older[i].second);
  return out;
}

Checkpointer::Checkpointer(const RunConfig& config, const RunPlan& plan, const parallel::Grid& grid)
    : config_(config), grid_(grid), dir_(plan.checkpoint_dir),
      last_(std::chrono::steady_clock::now()) {}

bool Checkpointer::due(int step) {
  if (!enabled()) return false;
  const CheckpointConfig& k = config_.checkpoint;
  if (step == config_.train.steps - 1) return true;
  if (k.every > 0 && (step + 1) % k.every == 0) return true;
  if (k.every_minutes <= 0) return false;
  // Clocks differ between ranks: rank 0's decides.
  const double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count() / 60.0;
  std::vector<int> flag{grid_.rank() == 0 && minutes >= k.every_minutes ? 1 : 0};
  parallel::MpiComm all(parallel::borrow_comm(grid_.comm()));
  all.broadcast(Span<int>(flag), 0);
  return flag[0] != 0;
}

Checkpointer::Saved Checkpointer::save(const CheckpointMeta& meta, const PipelineModel& model,
                                       const OptimizerStep& optimizer,
                                       const std::string& tokenizer) {
  const auto start = std::chrono::steady_clock::now();
  Saved saved;
  saved.path = checkpoint_file(dir_, meta.step);
  const WriteStats stats = write_model_file(saved.path, model, &optimizer, meta, config_.model,
                                            grid_, tokenizer, config_.checkpoint.direct_io);
  saved.bytes = stats.bytes;
  saved.staging = stats.staging;
  saved.direct = stats.direct;
  parallel::run_agreed(grid_.comm(), [&] {
    if (grid_.rank() != 0) return;
    publish(dir_, saved.path);
    prune(dir_, meta.step, config_.checkpoint.keep);
  });
  last_ = std::chrono::steady_clock::now();
  saved.seconds = std::chrono::duration<double>(last_ - start).count();
  return saved;
}

void Checkpointer::discard(int step) {
  if (grid_.rank() != 0) return;
  std::error_code ec;
  std::filesystem::remove(checkpoint_file(dir_, step) + ".partial", ec);
}

} // namespace gridlm::engine
