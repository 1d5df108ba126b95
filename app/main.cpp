// gridlm: the one executable. Starts MPI, parses the command line (CLI11), runs the chosen
// subcommand, and turns every failure into a clear message and a non-zero exit: errors all
// ranks agreed on exit cleanly; an error only one rank knows about ends the job via MPI_Abort.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "app/cmd_checkpoint.hpp"
#include "app/cmd_grid.hpp"
#include "app/cmd_plan.hpp"
#include "app/cmd_prepare_data.hpp"
#include "app/cmd_profile.hpp"
#include "app/cmd_sample.hpp"
#include "app/cmd_train.hpp"
#include "app/exit_status.hpp"
#include "gridlm/version.hpp"
#include "layers/blas_info.hpp"
#include "layers/kokkos_runtime.hpp"
#include "parallel/agree.hpp"
#include "parallel/comm.hpp"
#include "parallel/diagnostics.hpp"
#include "parallel/mpi_runtime.hpp"

namespace {

// The ranks leave only after the reporting rank printed the agreed report: a rank that exits
// with status 1 first makes mpiexec or srun end the reporter before it printed (seen in about 1
// run in 7). A barrier with a deadline, since an agreement on a sub-communicator leaves ranks
// outside it that never come; false when they did not.
bool wait_for_report() {
  MPI_Request barrier = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &barrier) != MPI_SUCCESS) return false;
  const double deadline = MPI_Wtime() + 5.0;
  int done = 0;
  while (!done && MPI_Wtime() < deadline) {
    MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
    if (!done) usleep(1000);
  }
  return done != 0;
}

} // namespace

namespace {

std::string version_text() {
  namespace b = gridlm::build;
  return fmt::format("gridlm {} ({} build, {})\n  MPI:    {}\n  HDF5:   {} (parallel)\n"
                     "  Kokkos: {}\n  BLAS:   {} ({} thread{} a rank)\n  CUDA:   {}\n  NCCL:   {}",
                     b::version, b::build_type, b::compiler,
                     gridlm::parallel::mpi_library_version(), b::hdf5_version,
                     gridlm::layers::kokkos_description(), gridlm::layers::blas_library_path(),
                     gridlm::layers::blas_threads(), gridlm::layers::blas_threads() == 1 ? "" : "s",
                     b::cuda ? "enabled" : "disabled", b::nccl ? "enabled" : "disabled");
}

// The command line as typed, quoted where needed, for files that record what made them.
std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool plain =
        !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
    out += (i > 0 ? " " : "") + (plain ? arg : "'" + arg + "'");
  }
  return out;
}

// Edits (insert, delete, replace) that turn a into b: how near a misspelling is.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "" when argv[1] is an option or a subcommand; else the message for the unknown word, with the
// nearest subcommand when one is near enough to be a misspelling.
std::string unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::string names, nearest;
  std::size_t best = 3; // more edits than this is another word, not a misspelling
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
    const std::size_t d = edit_distance(word, sub->get_name());
    if (d < best) best = d, nearest = sub->get_name();
  }
  return fmt::format("gridlm: unknown subcommand '{}'.{} The subcommands are {} (gridlm --help "
                     "says what each does).",
                     word, nearest.empty() ? "" : " Did you mean '" + nearest + "'?", names);
}

// Thread counts that OpenMP and OpenBLAS would read as 0 or garbage and then ignore in silence.
void check_environment() {
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const std::string text = value;
    bool ok = !text.empty();
    for (std::size_t at = 0; ok && at < text.size();) {
      const std::size_t comma = std::min(text.find(',', at), text.size());
      const std::string part = text.substr(at, comma - at);
      ok = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos &&
           part.size() < 6 && std::stoi(part) > 0;
      at = comma + 1;
    }
    if (!ok) {
      throw gridlm::Error(fmt::format("environment: {}='{}' is not a thread count; set it to a "
                                      "positive whole number (threads per rank), or unset it",
                                      name, text));
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  gridlm::parallel::MpiRuntime mpi(argc, argv);
  gridlm::layers::KokkosRuntime kokkos(argc, argv);

  CLI::App app{"gridlm: trains GPT-style language models on a data x pipeline x tensor grid "
               "of MPI ranks.",
               "gridlm"};
  app.set_version_flag("--version", version_text(), "Print the version and build configuration");
  app.require_subcommand(1);
  app.footer("Run 'gridlm SUBCOMMAND --help' for a subcommand's options. Launch under mpiexec "
             "or srun; every rank runs the same command.");
  gridlm::app::add_grid_command(app);
  gridlm::app::add_train_command(app);
  gridlm::app::add_config_command(app);
  gridlm::app::add_plan_command(app);
  gridlm::app::add_profile_command(app);
  gridlm::app::add_prepare_data_command(app, command_line(argc, argv));
  gridlm::app::add_sample_command(app);
  gridlm::app::add_checkpoint_command(app);

  if (const std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
    if (mpi.rank() == 0) std::fprintf(stderr, "%s\n", unknown.c_str());
    return 1;
  }
  try {
    gridlm::parallel::run_agreed(MPI_COMM_WORLD, check_environment);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same command line, so every rank fails alike; one report is enough.
    // --help and --version end with 0; every command-line error with 1, as every other error
    // (CLI11's own codes, 105 to 111, would mean nothing to a job script).
    const int code = mpi.rank() == 0 ? app.exit(e) : e.get_exit_code();
    return code == 0 ? 0 : 1;
  } catch (const gridlm::CollectiveError& e) {
    if (e.reporter()) {
      std::fprintf(stderr, "gridlm: error\n%s\n", e.what());
      std::fflush(stderr);
    }
    // Without the barrier, MPI_Finalize could wait for ranks that never come, and with
    // transfers the error abandoned it could wait for them: leave without it.
    if (!wait_for_report() || gridlm::parallel::abandoned_transfers() > 0) {
      std::fflush(nullptr);
      std::_Exit(1);
    }
    return 1;
  } catch (const gridlm::Error& e) {
    gridlm::abort_job(e.what(), e.grid_context());
  } catch (const std::exception& e) {
    gridlm::abort_job(e.what());
  }
  return gridlm::app::exit_status();
}
