// An MPI-IO error met while writing a file ends the job from the rank that meets it. HDF5 goes on
// after a failed write inside its flush and close (a full file system, a quota) and enters its
// next collective, which the other ranks wait in elsewhere: both wait for ever, and no rank
// returns to report. MPI-IO calls a file's error handler at the failure itself, before HDF5
// sees it, so that is where gridlm ends the job, naming the file and MPI's reason.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <string>

namespace gridlm::io {

// Gives the MPI file under `file` (an HDF5 file of the MPI-IO driver) the handler above, with
// `path` to name it by, and returns that MPI file: forget_write_errors(it) once it is closed.
MPI_File end_job_on_write_errors(hid_t file, const std::string& path);
void forget_write_errors(MPI_File file);

// Ends the job from this rank: `what` ("write", "flush", "close") of the file at `path` failed
// for `reason`. A NAME.partial (every file gridlm writes is one until complete) is removed first.
[[noreturn]] void end_job_on_write_error(const std::string& path, const std::string& what,
                                         const std::string& reason);

} // namespace gridlm::io
