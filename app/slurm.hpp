// What Slurm says about the allocation, read from the environment srun/sbatch set, so that the
// start-up report can show it and catch a launch that does not match it.
#pragma once

#include <optional>
#include <string>

namespace gridlm::app {

struct SlurmInfo {
  std::string job_id;         // SLURM_JOB_ID
  std::string nodes;          // SLURM_JOB_NUM_NODES (or SLURM_NNODES)
  std::string tasks;          // SLURM_NTASKS
  std::string tasks_per_node; // SLURM_TASKS_PER_NODE, e.g. "4(x2)"
  std::string node_list;      // SLURM_JOB_NODELIST
};

// Empty when not running under Slurm (no SLURM_JOB_ID).
std::optional<SlurmInfo> read_slurm_environment();

// `path` with every "{job_id}" replaced by the Slurm job's id (the same when the job is
// requeued), or by "local" outside a Slurm job.
std::string expand_job_id(const std::string& path);

// One line for the start-up report; adds a warning when SLURM_NTASKS differs from `world_size`
// (for instance the binary was started without srun inside an allocation).
std::string describe_slurm(const SlurmInfo& info, int world_size);

} // namespace gridlm::app
