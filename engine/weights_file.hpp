// Reading a weights or checkpoint file on one process (`gridlm sample`): one float32 dataset per
// parameter at its global shape under PyTorch's GPT-2 names, the model's shape as root
// attributes; any stage and tensor-parallel rank takes its shard. Files are written
// collectively by engine/checkpoint; the model attributes here serve the reference dump too.
#pragma once

#include <string>

#include "io/h5_file.hpp"
#include "layers/model_config.hpp"

namespace gridlm::layers {
class GPT;
}

namespace gridlm::engine {

// The model's shape as attributes, so a file says what it holds without gridlm.
void write_model_attributes(io::H5File& f, const layers::ModelConfig& m);
// Reads them back. Throws gridlm::Error naming the file and the attribute that is missing or
// out of range.
layers::ModelConfig read_model_attributes(io::H5File& f);

// Fills `gpt`'s parameters (its stage, its tensor-parallel shard) from a weights file whose
// model attributes match gpt's configuration. Throws gridlm::Error naming the file and the
// tensor that is missing or has another shape.
void load_weights(layers::GPT& gpt, io::H5File& f);

// Tensor `name` of the file at `path`, read whole (`global`, of `shape`), into this rank's shard
// of it in `host` (gpt's parameters in host memory). Returns 1, or 0 when the model has no
// tensor of that name. Throws gridlm::Error naming the file and tensor when its shape differs.
std::size_t place_weight(const layers::GPT& gpt, float* host, const std::string& name,
                         const std::vector<std::int64_t>& shape, const float* global,
                         const std::string& path);

} // namespace gridlm::engine
