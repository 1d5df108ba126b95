// The time of one piece of the model (a block, the embedding, the head) at a tensor-parallel
// degree and micro-batch size, as the layout planner prices it: from a measured profile
// (interpolated between the profiled micro-batch sizes) or from a machine file (FLOPs at its
// GEMM throughput, bytes at its memory bandwidth, and the tensor-parallel collectives the engine
// runs over its intra-node link).
#pragma once

#include "engine/profile.hpp"
#include "engine/run_config.hpp"

namespace gridlm::engine {

enum class Piece { block, embedding, head };

OpTimes op_cost(const Profile& p, const RunConfig& config, Piece piece, int tp, int b);

} // namespace gridlm::engine
