// `gridlm plan`: builds a pipeline schedule, checks it, simulates it, prints each stage's op
// list with the bubble and peak activations in flight, and draws the timeline as SVG.
#pragma once

#include <CLI/CLI.hpp>

namespace gridlm::app {

void add_plan_command(CLI::App& app);

} // namespace gridlm::app
