// The weights file (output.weights, model.h5): one float32 dataset per parameter at its global
// shape under PyTorch's GPT-2 names, the model's shape as root attributes and a format string —
// what h5py users and `gridlm sample` read. Written from any layout (gathered over tp, sent
// along pp to rank 0); read into any stage and tensor-parallel rank (each takes its shard).
#pragma once

#include <string>

#include "engine/pipeline_model.hpp"
#include "io/h5_file.hpp"
#include "layers/gpt.hpp"

namespace gridlm::engine {

// The model's shape as attributes, so a file says what it holds without gridlm.
void write_model_attributes(io::H5File& f, const layers::ModelConfig& m);
// Reads them back. Throws gridlm::Error naming the file and the attribute that is missing or
// out of range.
layers::ModelConfig read_model_attributes(io::H5File& f);

// Collective over the grid: each tensor is gathered over its tensor group, sent from the
// pipeline stage that holds it to rank 0, and written there at its global shape (through a
// .partial file renamed when complete). A non-empty `tokenizer` (rank 0's; the serialized
// SentencePiece model of the training data) is stored as /tokenizer/model for decoding.
void write_weights(const std::string& path, const PipelineModel& model,
                   const layers::ModelConfig& config, const parallel::Grid& grid,
                   const std::string& tokenizer = "");

// Fills `gpt`'s parameters (its stage, its tensor-parallel shard) from a weights file whose
// model attributes match gpt's configuration. Throws gridlm::Error naming the file and the
// tensor that is missing or has another shape.
void load_weights(layers::GPT& gpt, io::H5File& f);

} // namespace gridlm::engine
