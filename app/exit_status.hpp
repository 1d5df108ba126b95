// The status the gridlm process exits with once its subcommand returned normally, and the
// statuses with a meaning for job scripts (jobscripts/README.md).
#pragma once

namespace gridlm::app {

// "Checkpointed, run me again": the run saved a checkpoint and stopped before train.steps
// because its job is ending (a signal, the time limit). EX_TEMPFAIL of sysexits.h.
constexpr int exit_checkpointed = 75;

// 0 unless the subcommand set another.
inline int& exit_status() {
  static int status = 0;
  return status;
}

} // namespace gridlm::app
