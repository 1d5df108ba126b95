// `gridlm checkpoint inspect|verify|export`: what a checkpoint or weights file holds, whether
// it is intact, and its weights alone.
#pragma once

#include <CLI/CLI.hpp>

namespace gridlm::app {

void add_checkpoint_command(CLI::App& app);

} // namespace gridlm::app
