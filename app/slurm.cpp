// Reading and describing the Slurm environment.
#include "app/slurm.hpp"

#include <cstdlib>

#include <fmt/format.h>

namespace gridlm::app {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

} // namespace

std::optional<SlurmInfo> read_slurm_environment() {
  SlurmInfo info;
  info.job_id = env("SLURM_JOB_ID");
  if (info.job_id.empty()) return std::nullopt;
  info.nodes = env("SLURM_JOB_NUM_NODES");
  if (info.nodes.empty()) info.nodes = env("SLURM_NNODES");
  info.tasks = env("SLURM_NTASKS");
  info.tasks_per_node = env("SLURM_TASKS_PER_NODE");
  info.node_list = env("SLURM_JOB_NODELIST");
  return info;
}

std::string expand_job_id(const std::string& path) {
  static const std::string key = "{job_id}";
  std::string id = env("SLURM_JOB_ID");
  if (id.empty()) id = "local";
  std::string out = path;
  for (std::size_t at = out.find(key); at != std::string::npos; at = out.find(key, at + id.size()))
    out.replace(at, key.size(), id);
  return out;
}

std::string describe_slurm(const SlurmInfo& info, int world_size) {
  auto or_unset = [](const std::string& s) { return s.empty() ? std::string("unset") : s; };
  std::string line = fmt::format("slurm: job {}, {} nodes ({}), {} tasks, tasks per node {}",
                                 info.job_id, or_unset(info.nodes), or_unset(info.node_list),
                                 or_unset(info.tasks), or_unset(info.tasks_per_node));
  if (!info.tasks.empty() && info.tasks != std::to_string(world_size)) {
    line += fmt::format("\nwarning: Slurm allocated {} tasks but MPI started {} ranks; launch "
                        "with srun (or mpiexec -n $SLURM_NTASKS) to use the whole allocation",
                        info.tasks, world_size);
  }
  return line;
}

} // namespace gridlm::app
