// `gridlm grid`: builds the process grid the way a training job would and prints it.
#pragma once

#include <CLI/CLI.hpp>

namespace gridlm::app {

// Adds the subcommand to `app`; it runs when selected.
void add_grid_command(CLI::App& app);

} // namespace gridlm::app
