// Looking into checkpoint and weights files on one process, without a model: what they hold
// (`gridlm checkpoint inspect`), whether every tensor still matches its checksum (`verify`),
// and the weights alone as a weights file (`export`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/model_file.hpp"
#include "layers/model_config.hpp"

namespace gridlm::engine {

struct TensorSummary {
  std::string name;                 // its dataset path
  std::vector<std::uint64_t> shape; // global
  double norm = 0.0;                // L2 norm, in double
  std::uint64_t stored = 0;         // the checksum the file holds
  std::uint64_t checksum = 0;       // the one recomputed from the data
};

struct FileSummary {
  std::string path;
  std::uint64_t bytes = 0;
  std::string gridlm_version;
  CheckpointMeta meta;
  layers::ModelConfig model;
  std::vector<TensorSummary> tensors; // parameters, then moments, in the file's order
};

// Which tensors a summary reads: all of them, or the weights alone (a checkpoint's moments are
// skipped, for what reads only the weights after it).
enum class Tensors { all, weights };

// What a reader does with each tensor as it is read: the file's summary so far (its root
// attributes and model shape are in), the tensor's, and its data (row-major, whole).
using TensorVisitor =
    std::function<void(const FileSummary&, const TensorSummary&, const std::vector<float>&)>;

// One process: every tensor (of `which`) read whole, once, and shown to `visit` when given.
// Throws gridlm::Error naming the file when it is not a gridlm-checkpoint file of a version this
// gridlm reads, or when its checksum table leaves out a tensor the model's shape calls for (a
// table cut short would pass for a whole file).
FileSummary summarize_model_file(const std::string& path, Tensors which = Tensors::all,
                                 const TensorVisitor& visit = {});

// summarize_model_file, then an error naming every tensor whose data does not match its
// checksum (`gridlm checkpoint verify`, and `gridlm sample`, whose visitor loads the weights
// from the same read).
FileSummary verify_model_file(const std::string& path, Tensors which = Tensors::all,
                              const TensorVisitor& visit = {});

// One process: the serialized tokenizer stored in `path` (a checkpoint or a weights file), or ""
// when it holds none (a run on synthetic data).
std::string stored_tokenizer(const std::string& path);

// One process: throws gridlm::Error when the checkpoint at `path` stores a tokenizer other than
// `tokenizer` (the dataset's; "" for none): its token ids stand for other pieces, which no
// data.on_change makes the same run.
void check_same_tokenizer(const std::string& path, const std::string& tokenizer);

// One process: the weights of `path` (a checkpoint or a weights file) written to `out` as a
// weights file (through out.partial, renamed when complete, removed when not), with their
// checksums verified.
void export_weights(const std::string& path, const std::string& out);

} // namespace gridlm::engine
