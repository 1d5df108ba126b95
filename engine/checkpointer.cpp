// Checkpoint cadence, `latest` and pruning.
#include "engine/checkpointer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "parallel/agree.hpp"
#include "parallel/comm_mpi.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {
namespace {

// Rank 0: `latest` names `file`, replaced in one rename.
void publish(const std::string& dir, const std::string& file) {
  const std::string latest = latest_file(dir), partial = latest + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << std::filesystem::path(file).filename().string() << "\n";
    if (!out) throw Error(fmt::format("cannot write '{}'", partial));
  }
  std::error_code ec;
  std::filesystem::rename(partial, latest, ec);
  if (ec) throw Error(fmt::format("cannot rename '{}' to '{}': {}", partial, latest, ec.message()));
}

// Rank 0: removes complete checkpoints older than the newest `keep`.
void prune(const std::string& dir, int keep) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && entry.path().extension() == ".h5") files.push_back(name);
  }
  std::sort(files.begin(), files.end()); // step numbers are zero-padded: names sort by step
  for (std::size_t i = 0; i + std::size_t(keep) < files.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(dir + "/" + files[i], ec);
  }
}

} // namespace

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
    prune(dir_, config_.checkpoint.keep);
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
