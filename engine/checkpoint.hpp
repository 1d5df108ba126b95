// Checkpoint and weights files (docs/formats/checkpoint.md): one HDF5 file holding every
// parameter once, at its global PyTorch shape under its PyTorch name, written collectively —
// each rank its own shard as boxes of the global tensor (engine::param_shard), data-parallel
// replicas and tensor ranks of replicated tensors leaving it to one holder — so no rank ever
// gathers another's shard. A checkpoint adds the AdamW moments under optimizer/m/ and
// optimizer/v/ and the run's position; a weights file is the same without the moments. Any
// layout reads any file, each rank its own shard, and every dataset read is checked against
// the checksum stored with it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/model_file.hpp"
#include "engine/optimizer_step.hpp"
#include "engine/pipeline_model.hpp"
#include "io/parallel_h5.hpp"
#include "parallel/grid.hpp"

namespace gridlm::engine {

// What a write cost.
struct WriteStats {
  std::uint64_t bytes = 0;   // the file's size
  std::uint64_t staging = 0; // the most bytes one rank copied to host memory to write (0 when
                             // the model computes on the host: its buffers are written as they are)
  std::uint64_t direct = 0;  // bytes the ranks wrote with O_DIRECT, past the page cache (summed)
};

// Collective over the grid: writes `path` through `path.partial`, which rank 0 renames once
// the file is complete and closed, so a failure never leaves a broken file under the name.
// With `optimizer` the moments go in; `tokenizer` (rank 0's serialized SentencePiece model,
// "" for none) too. Returns the bytes of the file and the largest host staging any rank
// needed (on every rank). `direct_io`: large contiguous shards go with O_DIRECT
// (io::ParallelFile::set_direct_io).
WriteStats write_model_file(const std::string& path, const PipelineModel& model,
                            const OptimizerStep* optimizer, const CheckpointMeta& meta,
                            const layers::ModelConfig& config, const parallel::Grid& grid,
                            const std::string& tokenizer, bool direct_io = true);

// Collective over the grid, after GradSync::finish: the reduced gradients (the mean over the
// replicas, before clipping) of every parameter at its global shape and PyTorch name, as a
// weights file holds the parameters, under the format name "gridlm-gradients" (so it never loads
// as weights); for comparing layouts and for analysis. Under ZeRO-1 they are gathered over dp.
WriteStats write_gradient_file(const std::string& path, const PipelineModel& model, GradSync& sync,
                               const CheckpointMeta& meta, const layers::ModelConfig& config,
                               const parallel::Grid& grid, bool direct_io = true);

// Collective over the grid: the root attributes of `path`, checked as read_model_file checks
// them (format, version, model shape, moments when `want_optimizer`), without reading a tensor.
CheckpointMeta read_model_header(const std::string& path, const layers::ModelConfig& config,
                                 const parallel::Grid& grid, bool want_optimizer);

// Collective over the grid: fills the model's parameters (each rank its shards) and, when
// `optimizer` is given, its moments, from `path`. Throws the same CollectiveError on every rank
// for a file that is missing, not a gridlm model file, of another format version, of another
// model shape, damaged (a checksum that does not match) or, when moments are wanted, without
// them (the message points to --init-from). `direct_io` as for write_model_file.
CheckpointMeta read_model_file(const std::string& path, PipelineModel& model,
                               OptimizerStep* optimizer, const layers::ModelConfig& config,
                               const parallel::Grid& grid, bool direct_io = true);

} // namespace gridlm::engine
