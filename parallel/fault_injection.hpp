// Test-only fault injection, so that the tests can prove that gridlm explains a hang instead of
// waiting forever (tests/cli/hang.sh). The environment variable GRIDLM_FAULT asks for one fault:
//   GRIDLM_FAULT=skip_send:RANK:STEP   world rank RANK drops its first send at or after STEP
//   GRIDLM_FAULT=hang:RANK:STEP        world rank RANK sleeps forever when STEP begins
//   GRIDLM_FAULT=hang_in_save:RANK:STEP  world rank RANK sleeps forever as the file of the
//                                      checkpoint after STEP is created (a stalled file system;
//                                      in prepare-data, STEP 1 is its dataset)
//   GRIDLM_FAULT=nan_grad:RANK:STEP    world rank RANK's gradient gets a NaN in STEP
//   GRIDLM_FAULT=loss_spike:RANK:STEP  world rank RANK's loss of STEP is 100 higher
//   GRIDLM_FAULT=error:RANK:STEP       world rank RANK throws an error right after its first
//                                      backward op of STEP, with transfers still in flight
// Several, separated by commas, ask for each (nan_grad:0:7,loss_spike:0:17).
// Each fault happens once per process (a rolled-back run does not meet it again).
// STEP counts from 1, as the log does.
// Unset (as in every real run) it costs one branch per send, per step and per backward op.
#pragma once

namespace gridlm::parallel::fault {

// Reads GRIDLM_FAULT (once, on the main thread, after MPI_Init); throws gridlm::Error naming
// the variable and its forms when it is set but malformed.
void configure_from_environment();

// True once, for the send that is to be dropped (the recorder's step tells which step it is).
bool skip_this_send();

// Sleeps forever when this rank is to hang at this step.
void hang_if_asked(int step);

// Sleeps forever when this rank is to hang as it writes the checkpoint of `steps_done` (from 1).
void hang_in_save_if_asked(int steps_done);

// True once, when this rank is to poison its gradient in `step` (0-based).
bool nan_gradient_now(int step);

// Throws gridlm::Error once, in the step the fault names, when this rank is the one.
void error_if_asked();

// What to add to this rank's local loss in `step` (0-based): 100 once, when asked, else 0.
double loss_offset_now(int step);

} // namespace gridlm::parallel::fault
