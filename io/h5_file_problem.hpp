// Why a path cannot be opened as an HDF5 file, said in words before any collective open, so that
// a missing, empty, foreign or damaged file is a clear error on every rank rather than HDF5's
// error stack (or a hang inside MPI-IO).
#pragma once

#include <string>

namespace gridlm::io {

// Whether `path` is an HDF5 file (false for a missing or unreadable one), without HDF5 printing
// anything.
bool is_hdf5_file(const std::string& path);

// Why `path` cannot be opened as an HDF5 file, in words ("does not exist", "is a directory",
// "is empty", "is not an HDF5 file: it begins with text 'step,loss'"), or "" when it is a
// readable file with HDF5's signature; opening it may still find it damaged or cut short.
std::string hdf5_file_problem(const std::string& path);

// The message for an HDF5 file with the signature that HDF5 still cannot open: its size and
// HDF5's reason ("truncated file: eof = ..."), and the fix.
std::string damaged_hdf5_message(const std::string& path);

} // namespace gridlm::io
