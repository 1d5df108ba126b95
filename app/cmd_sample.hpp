// `gridlm sample`: generate tokens from a weights file.
#pragma once

#include <CLI/CLI.hpp>

namespace gridlm::app {

void add_sample_command(CLI::App& app);

} // namespace gridlm::app
