// engine/job_deadline: when the batch job this process runs in will be ended by its time limit,
// learnt from the allocation rather than from the user: Slurm's SLURM_JOB_END_TIME (Unix time,
// in the job's environment where the Slurm release sets it; with SLURM_JOB_START_TIME, the
// limit) when present, else `squeue -h -j $SLURM_JOB_ID -o "%L %l"` (the time left and the
// limit). Nothing outside a Slurm job (no SLURM_JOB_ID), or for a
// job without a time limit.
#pragma once

#include <optional>
#include <string>

namespace gridlm::engine {

struct JobDeadline {
  double seconds_left = 0.0;  // from the moment it was read
  std::string source;         // where it came from, for the start-up report
  double limit_seconds = 0.0; // the job's whole time limit (0: not known)
};

// Reads it now (one rank is enough: it is the job's). Throws gridlm::Error when Slurm's answer
// cannot be understood. `live`: from squeue only, which follows a limit changed while the job
// runs (`scontrol update JobId=N TimeLimit=...`; SLURM_JOB_END_TIME is the end at the start),
// and a limit lifted to UNLIMITED is an end at infinity rather than no answer. squeue is given
// `wait_seconds` at most (the other ranks wait for the answer, under the hang watchdog): a
// slurmctld that does not answer by then leaves the end unknown.
std::optional<JobDeadline> read_job_deadline(bool live = false, double wait_seconds = 20.0);

// Slurm's time format of `squeue -o %L`: [days-][hours:]minutes:seconds, or UNLIMITED /
// NOT_SET / INVALID (no limit: nullopt). Throws gridlm::Error naming the text otherwise.
std::optional<double> parse_slurm_duration(const std::string& text);

} // namespace gridlm::engine
