// The MPI-IO error handler of the files gridlm writes (see write_errors.hpp).
#include "io/write_errors.hpp"

#include <mpi.h>

#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "io/h5_check.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_check.hpp"

namespace gridlm::io {
namespace {

// The files with the handler, by MPI file, and their paths. The main thread alone opens and
// closes files and does their I/O (MPI_THREAD_FUNNELED), so no lock.
std::map<MPI_File, std::string>& paths() {
  static std::map<MPI_File, std::string> files;
  return files;
}

void on_error(MPI_File* file, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(*code, text, &length) != MPI_SUCCESS) length = 0;
  const auto known = paths().find(*file);
  end_job_on_write_error(known == paths().end() ? std::string() : known->second, "write",
                         "MPI-IO failed: " + (length > 0 ? std::string(text, std::size_t(length))
                                                         : std::string("no reason given")));
}

MPI_File* mpi_file(hid_t file) {
  void* handle = nullptr;
  GRIDLM_H5_CHECK(H5Fget_vfd_handle(file, H5P_DEFAULT, &handle));
  return static_cast<MPI_File*>(handle);
}

} // namespace

MPI_File end_job_on_write_errors(hid_t file, const std::string& path) {
  static const MPI_Errhandler handler = [] {
    MPI_Errhandler h = MPI_ERRHANDLER_NULL;
    GRIDLM_MPI_CHECK(MPI_File_create_errhandler(on_error, &h));
    return h;
  }();
  MPI_File* f = mpi_file(file);
  GRIDLM_MPI_CHECK(MPI_File_set_errhandler(*f, handler));
  paths()[*f] = path;
  return *f;
}

void forget_write_errors(MPI_File file) { paths().erase(file); }

void end_job_on_write_error(const std::string& path, const std::string& what,
                            const std::string& reason) {
  // gridlm writes every file as NAME.partial and renames it when complete: this one never will
  // be, and the file it was to replace stays as it was.
  const std::string suffix = ".partial";
  bool removed = false;
  if (path.size() > suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    std::error_code ec;
    removed = std::filesystem::remove(path, ec);
  }
  abort_job(fmt::format(
      "cannot {} '{}': {}. This rank ends the job at once: HDF5 may go on into collectives "
      "that other ranks are not in (a full file system or a quota is the usual cause: free "
      "space there). {}A file this one was to replace is left as it was",
      what, path.empty() ? std::string("a file") : path, reason,
      removed ? "The half-written file is removed. " : ""));
}

} // namespace gridlm::io
