// Where a rank's shard of a parameter lies in the tensor at its global (PyTorch) shape, as the
// boxes io::ParallelFile writes and reads: rows-split tensors (the fused QKV in its three
// parts, each split separately; the vocabulary with its padding rows left out), columns-split
// ones, and replicated ones. The same rules as layers::global_index, in boxes: the building
// block of collective checkpoints that any layout can write and any other read.
#pragma once

#include "io/parallel_h5.hpp"
#include "layers/parameters.hpp"

namespace gridlm::engine {

// The boxes of parameter p that rank tp_rank of its tensor group holds.
io::TensorShard param_shard(const layers::ParamInfo& p, int tp_rank);

// The same shard with no boxes: for a rank that leaves the writing to another holding the same
// elements (a data-parallel replica; a tensor-parallel rank of a replicated tensor).
io::TensorShard without_boxes(io::TensorShard shard);

} // namespace gridlm::engine
