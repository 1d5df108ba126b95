// The bucket and ZeRO-1 shard plan.
#include "engine/dp_shards.hpp"

#include <algorithm>

namespace gridlm::engine {

ChunkShards plan_shards(std::size_t total, std::size_t bucket, int dp, int rank) {
  const auto n = std::size_t(dp);
  bucket = bucket == 0 ? std::max<std::size_t>(total, 1) : (bucket + n - 1) / n * n;
  ChunkShards s;
  for (std::size_t end = total; end > 0;) {
    ShardPiece p;
    p.begin = end > bucket ? end - bucket : 0;
    p.size = end - p.begin;
    p.block = (p.size + n - 1) / n;
    const std::size_t first = std::min(p.size, std::size_t(rank) * p.block);
    p.own_begin = p.begin + first;
    p.own_size = std::min(p.block, p.size - first);
    p.state = s.state_size;
    s.state_size += p.block;
    s.pieces.push_back(p);
    end = p.begin;
  }
  return s;
}

} // namespace gridlm::engine
