// Parameter shards as boxes of the global tensor.
#include "engine/param_shard.hpp"

#include <algorithm>

namespace gridlm::engine {

io::TensorShard param_shard(const layers::ParamInfo& p, int tp_rank) {
  io::TensorShard s;
  s.global_shape.assign(p.shape.begin(), p.shape.end());
  s.local_shape.assign(p.local_shape.begin(), p.local_shape.end());
  auto whole = [](const std::vector<std::uint64_t>& shape) {
    return io::Box{std::vector<std::uint64_t>(shape.size(), 0), shape};
  };
  // A shard the size of the whole tensor is the whole tensor on tensor rank 0 only: a vocabulary
  // that pads to one slice (8 rows at tp 2) leaves the other ranks padding alone.
  if (p.split == layers::TpSplit::replicated || (tp_rank == 0 && p.local_shape == p.shape)) {
    s.file.push_back(whole(s.global_shape));
    s.memory.push_back(whole(s.local_shape));
  } else if (p.split == layers::TpSplit::rows) {
    // Each part's rows split alike; rows past a part's end (vocabulary padding) stay in memory.
    const std::uint64_t part_rows = s.global_shape[0] / std::uint64_t(p.parts),
                        local_rows = s.local_shape[0] / std::uint64_t(p.parts),
                        begin = std::uint64_t(tp_rank) * local_rows;
    const std::uint64_t real = begin >= part_rows ? 0 : std::min(local_rows, part_rows - begin);
    for (int part = 0; part < p.parts; ++part) {
      if (real == 0) continue;
      io::Box file = whole(s.global_shape), memory = whole(s.local_shape);
      file.start[0] = std::uint64_t(part) * part_rows + begin;
      memory.start[0] = std::uint64_t(part) * local_rows;
      file.count[0] = memory.count[0] = real;
      s.file.push_back(file);
      s.memory.push_back(memory);
    }
  } else {
    io::Box file = whole(s.global_shape);
    file.start[1] = std::uint64_t(tp_rank) * s.local_shape[1];
    file.count[1] = s.local_shape[1];
    s.file.push_back(file);
    s.memory.push_back(whole(s.local_shape));
  }
  return s;
}

io::TensorShard without_boxes(io::TensorShard shard) {
  shard.file.clear();
  shard.memory.clear();
  return shard;
}

} // namespace gridlm::engine
