// `gridlm profile`: measures op, optimizer and communication costs on the ranks it runs on and
// writes the profile file the layout planner (`gridlm plan --auto`) reads.
#pragma once

#include <CLI/CLI.hpp>

namespace gridlm::app {

void add_profile_command(CLI::App& app);

} // namespace gridlm::app
