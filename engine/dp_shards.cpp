// The bucket and ZeRO-1 shard plan.
#include "engine/dp_shards.hpp"

#include <algorithm>

namespace gridlm::engine {

std::size_t bucket_elements(double bucket_mb) {
  if (bucket_mb <= 0.0) return 0;
  return std::max<std::size_t>(std::size_t(bucket_mb * double(1 << 20) / sizeof(float)), 1);
}

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

bool padded(const ShardPiece& p, int dp) { return p.size != p.block * std::size_t(dp); }

std::size_t pad_elements(const ChunkShards& shards, int dp) {
  std::size_t pad = 0;
  for (const ShardPiece& p : shards.pieces) {
    if (padded(p, dp)) pad = std::max(pad, p.block * std::size_t(dp));
  }
  return pad;
}

ShardSizes shard_sizes(std::size_t total, std::size_t bucket, int dp) {
  const auto n = std::size_t(dp);
  const auto ceil_div = [](std::size_t a, std::size_t b) { return (a + b - 1) / b; };
  if (total == 0) return {};
  // One bucket of the whole buffer is not rounded to a multiple of dp; smaller ones are, so
  // that only the last (the buffer's start) may not divide.
  const std::size_t b = bucket == 0 ? total : ceil_div(bucket, n) * n;
  const std::size_t full = total / b, rest = total % b;
  ShardSizes s;
  for (const std::size_t size : {b, rest}) {
    const std::size_t count = size == b ? full : (rest > 0 ? 1 : 0), block = ceil_div(size, n);
    if (count == 0) continue;
    s.state += count * block;
    if (size % n != 0) s.pad = std::max(s.pad, block * n);
  }
  return s;
}

} // namespace gridlm::engine
