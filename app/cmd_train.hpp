// `gridlm train`: trains the GPT on the configured data over the grid of ranks.
#pragma once

#include <CLI/CLI.hpp>

namespace gridlm::app {

void add_train_command(CLI::App& app);
// `gridlm config`: prints the defaults as TOML (or Markdown, for docs/config.md).
void add_config_command(CLI::App& app);

} // namespace gridlm::app
