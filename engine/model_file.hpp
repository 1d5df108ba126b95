// The root of a gridlm model file (docs/formats/checkpoint.md): its format name and version,
// the record of the run that wrote it (CheckpointMeta), the model's shape and the table of the
// tensors' checksums. Host code without Kokkos, so that the command line (app/) can read and
// describe model files without being compiled for the device.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/parallel_h5.hpp"
#include "layers/model_config.hpp"

namespace gridlm::engine {

// The format names: checkpoints and weights files, and gradient files (output.gradients), which
// have the layout of a weights file under another name so that nothing loads them as weights.
inline constexpr const char* format_name = "gridlm-checkpoint";
inline constexpr const char* gradients_format_name = "gridlm-gradients";
inline constexpr int format_version = 1;
// Where a checkpoint keeps the AdamW moments: the parameter's name under each prefix.
inline constexpr const char* moment_prefixes[] = {"optimizer/m/", "optimizer/v/"};

// What a file says about the run that wrote it, besides the tensors.
struct CheckpointMeta {
  int step = 0;                   // optimizer steps completed
  std::uint64_t samples_seen = 0; // training samples consumed: the data cursor
  std::uint64_t tokens_seen = 0;  // training tokens consumed
  std::string config;             // the run's configuration as TOML ("" when not known)
  std::string layout;             // the layout that wrote it, in words
  std::string data_source;        // data.source of the run (its samples' order needs it)
  std::int64_t data_seed = 0;     // data.seed of the run
  // The tokens and documents of the training split data.source held (-1: a generated source,
  // or a file written before gridlm recorded them): a dataset remade at the same path differs.
  std::int64_t data_tokens = -1, data_documents = -1;
  // Sequences per optimizer step (micro_batch x grad_accum x dp) and the step the learning
  // rate's cosine decay ends at, resolved (-1: a file written before gridlm recorded them): a
  // run resumed with others follows another loss curve, which the start-up report says.
  std::int64_t global_batch = -1, decay_steps = -1;
  bool optimizer = false; // holds the AdamW moments (a checkpoint, not a weights file)
  // With the moments: the updates they hold (step less the steps skipped; a file written before
  // gridlm recorded it reads as step). -1 in a weights file.
  std::int64_t optimizer_updates = -1;
  std::string gridlm_version; // the gridlm that wrote it
};

// Collective over the file's ranks: the root attributes of a model file (format, version, the
// run's position and record, the model's shape), all but `checksums`. `format`: the format
// name, when not a checkpoint or weights file's.
void write_root_attributes(io::ParallelFile& f, const CheckpointMeta& meta,
                           const layers::ModelConfig& m, const char* format = nullptr);

// The root attributes of a model file: what the run was, and the model's shape. Throws
// gridlm::Error naming the file when it is not a gridlm-checkpoint file of this version.
CheckpointMeta read_root_attributes(const io::ParallelFile& f, const std::string& path,
                                    layers::ModelConfig& model);

// The `checksums` root attribute: each tensor dataset's path and checksum, in the file's order.
using ChecksumTable = std::vector<std::pair<std::string, std::uint64_t>>;
ChecksumTable read_checksums(const io::ParallelFile& f);
std::string checksum_text(const ChecksumTable& table);

// A checksum as the file writes it: 16 hexadecimal digits.
std::string checksum_hex(std::uint64_t v);

} // namespace gridlm::engine
