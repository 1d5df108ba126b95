// The root attributes and the checksum table of gridlm model files.
#include "engine/model_file.hpp"

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "gridlm/version.hpp"
#include "parallel/diagnostics.hpp"

namespace gridlm::engine {

std::string checksum_hex(std::uint64_t v) { return fmt::format("{:016x}", v); }

void write_root_attributes(io::ParallelFile& f, const CheckpointMeta& meta,
                           const layers::ModelConfig& m, const char* format) {
  f.write_attribute("/", "format", std::string(format != nullptr ? format : format_name));
  f.write_attribute("/", "format_version", std::int64_t(format_version));
  f.write_attribute("/", "gridlm_version", std::string(build::version));
  f.write_attribute("/", "optimizer", std::int64_t(meta.optimizer ? 1 : 0));
  f.write_attribute("/", "step", std::int64_t(meta.step));
  if (meta.optimizer) f.write_attribute("/", "optimizer_updates", meta.optimizer_updates);
  f.write_attribute("/", "samples_seen", std::int64_t(meta.samples_seen));
  f.write_attribute("/", "tokens_seen", std::int64_t(meta.tokens_seen));
  f.write_attribute("/", "config", meta.config);
  f.write_attribute("/", "layout", meta.layout);
  f.write_attribute("/", "data_source", meta.data_source);
  f.write_attribute("/", "data_seed", meta.data_seed);
  f.write_attribute("/", "data_tokens", meta.data_tokens);
  f.write_attribute("/", "data_documents", meta.data_documents);
  f.write_attribute("/", "global_batch", meta.global_batch);
  f.write_attribute("/", "decay_steps", meta.decay_steps);
  const std::pair<const char*, std::int64_t> model[] = {
      {"vocab_size", m.vocab_size}, {"seq_len", m.seq_len}, {"n_layer", m.n_layer},
      {"n_head", m.n_head},         {"d_model", m.d_model}, {"tied_embeddings", m.tied_embeddings}};
  for (const auto& [name, value] : model)
    f.write_attribute("/", name, value);
}

ChecksumTable read_checksums(const io::ParallelFile& f) {
  ChecksumTable table;
  std::istringstream lines(f.text_attribute("/", "checksums"));
  std::string name, value;
  while (lines >> name >> value)
    table.emplace_back(name, std::strtoull(value.c_str(), nullptr, 16));
  return table;
}

std::string checksum_text(const ChecksumTable& table) {
  std::string text;
  for (const auto& [name, sum] : table)
    text += name + " " + checksum_hex(sum) + "\n";
  return text;
}

CheckpointMeta read_root_attributes(const io::ParallelFile& f, const std::string& path,
                                    layers::ModelConfig& model) {
  std::string format;
  try {
    format = f.text_attribute("/", "format");
  } catch (const Error& e) {
    format = std::string("none: ") + e.what();
  }
  if (format != format_name) {
    throw Error(
        fmt::format("'{}' is not a gridlm checkpoint or weights file (format '{}')", path, format));
  }
  const double version = f.number_attribute("/", "format_version");
  if (version != format_version) {
    throw Error(fmt::format("'{}' has checkpoint format version {}; this gridlm reads version "
                            "{}: use the gridlm that wrote it",
                            path, version, format_version));
  }
  CheckpointMeta meta;
  meta.gridlm_version = f.text_attribute("/", "gridlm_version");
  meta.optimizer = f.number_attribute("/", "optimizer") != 0.0;
  meta.step = int(f.number_attribute("/", "step"));
  if (meta.optimizer) { // recorded since 2026-12-07's third change
    meta.optimizer_updates = f.has_attribute("/", "optimizer_updates")
                                 ? std::int64_t(f.number_attribute("/", "optimizer_updates"))
                                 : meta.step;
    if (meta.optimizer_updates < 0 || meta.optimizer_updates > meta.step) {
      throw Error(fmt::format("'{}' says its moments hold {} updates after {} steps: the file is "
                              "damaged; use an earlier checkpoint",
                              path, meta.optimizer_updates, meta.step));
    }
  }
  meta.samples_seen = std::uint64_t(f.number_attribute("/", "samples_seen"));
  meta.tokens_seen = std::uint64_t(f.number_attribute("/", "tokens_seen"));
  meta.config = f.text_attribute("/", "config");
  meta.layout = f.text_attribute("/", "layout");
  meta.data_source = f.text_attribute("/", "data_source");
  meta.data_seed = std::int64_t(f.number_attribute("/", "data_seed"));
  if (f.has_attribute("/", "data_tokens")) { // recorded since 2026-12-07
    meta.data_tokens = std::int64_t(f.number_attribute("/", "data_tokens"));
    meta.data_documents = std::int64_t(f.number_attribute("/", "data_documents"));
  }
  if (f.has_attribute("/", "global_batch")) { // recorded since 2026-12-07's second change
    meta.global_batch = std::int64_t(f.number_attribute("/", "global_batch"));
    meta.decay_steps = std::int64_t(f.number_attribute("/", "decay_steps"));
  }
  const std::pair<const char*, int*> keys[] = {{"vocab_size", &model.vocab_size},
                                               {"seq_len", &model.seq_len},
                                               {"n_layer", &model.n_layer},
                                               {"n_head", &model.n_head},
                                               {"d_model", &model.d_model}};
  for (const auto& [key, value] : keys)
    *value = int(f.number_attribute("/", key));
  model.tied_embeddings = f.number_attribute("/", "tied_embeddings") != 0.0;
  return meta;
}

} // namespace gridlm::engine
