// `gridlm prepare-data`: turns text (files, directories, JSON lines, or the built-in synthetic
// corpus) into a tokenized dataset file (docs/formats/dataset.md), on any number of ranks.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace gridlm::app {

// `command_line` is recorded in the dataset's created_by attribute.
void add_prepare_data_command(CLI::App& app, const std::string& command_line);

} // namespace gridlm::app
