// The run configuration as a file: the table of every key of engine::RunConfig (section, name,
// meaning, where it lives) drives TOML parsing, --set overrides, `gridlm config` and
// docs/config.md; validate() checks values that are each valid but impossible together.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "engine/run_config.hpp"

namespace gridlm::app {

using engine::RunConfig;

// One configurable key.
struct ConfigField {
  std::string section, key, doc;
  std::variant<int*, long*, double*, bool*, std::string*> target;
  std::string dotted() const { return section + "." + key; }
};

std::vector<ConfigField> config_fields(RunConfig& config);

// Reads a TOML file into `config` (which holds the defaults). Throws gridlm::Error naming the
// file and key for an unknown section or key, a wrong type or a TOML syntax error.
void load_config_file(RunConfig& config, const std::string& path);
// Applies "section.key=value". Throws gridlm::Error naming the key on bad input.
void apply_override(RunConfig& config, const std::string& assignment);
// Checks values that are each valid but impossible together or out of range.
void validate(const RunConfig& config);

// The defaults, then the file (when `path` is not empty), then each override in order, validated.
RunConfig read_run_config(const std::string& path, const std::vector<std::string>& sets);

// Every key with its value in `config`, as a TOML file (stored in checkpoints).
std::string config_as_toml(const RunConfig& config);
// The defaults as a TOML file, and as the Markdown table of docs/config.md.
std::string defaults_as_toml();
std::string defaults_as_markdown();

} // namespace gridlm::app
