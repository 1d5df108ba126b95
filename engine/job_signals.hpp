// engine/job_signals: the signals a batch system sends a running job, kept as requests that the
// step loop answers at its next step boundary (engine::JobControl). SIGUSR1 (what
// `#SBATCH --signal=USR1@N` sends) and SIGTERM (Slurm's time limit and preemption; SIGKILL
// follows after KillWait, 30 s by default) ask for a checkpoint and a clean stop; SIGUSR2 for a
// checkpoint and going on. A handler only stores the signal's number in a std::sig_atomic_t: no
// allocation, no I/O, no MPI. A repeated SIGTERM does not end the process early (a rank may get
// one from slurmstepd and one forwarded, and a rank that died mid-save would lose the save);
// Slurm's SIGKILL after KillWait does, and SIGINT (Ctrl-C) keeps its default action.
#pragma once

namespace gridlm::engine {

// Installs the handlers for SIGUSR1, SIGUSR2 and SIGTERM (idempotent); `gridlm train` does.
void install_job_signals();

// The stop signal received (SIGUSR1 or SIGTERM), 0 for none: kept until the run ends.
int job_stop_signal();

// SIGUSR2s received by this process so far. One `scancel --signal=USR2` reaches every rank, not
// always before the same step's end: the ranks agree on the largest count (engine::JobControl),
// so that the rank it reached late does not ask for the same save again a step later.
int job_saves_asked();

// "SIGUSR1" and the like, for messages.
const char* signal_name(int signal);

} // namespace gridlm::engine
