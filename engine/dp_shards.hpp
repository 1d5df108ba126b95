// engine::DpShards: how the gradient buckets of each chunk's flat buffer are laid out, and, for
// ZeRO-1, which part of each bucket a data-parallel replica owns. A bucket of `size` elements
// is cut into dp parts of `block` = ceil(size / dp) elements (the last parts shorter, or
// empty); replica r owns part r. The owned parts, each padded to `block`, one after another,
// are the shard layout: where the reduce-scattered gradients and the replica's AdamW moments
// live. Every replica computes the same plan.
#pragma once

#include <cstddef>
#include <vector>

namespace gridlm::engine {

struct ShardPiece {
  std::size_t begin = 0, size = 0;         // the bucket, in the chunk's flat buffer
  std::size_t block = 0;                   // ceil(size / dp): each replica's padded part
  std::size_t own_begin = 0, own_size = 0; // this replica's part (own_size <= block)
  std::size_t state = 0;                   // where that part starts in the shard layout
};

struct ChunkShards {
  std::vector<ShardPiece> pieces; // from the end of the buffer to its start
  std::size_t state_size = 0;     // elements of the shard layout (sum of blocks)
};

// parallel.grad_bucket_mb as a bucket's elements for plan_shards: at least one float, and 0 (one
// bucket of the whole buffer) for 0 MiB.
std::size_t bucket_elements(double bucket_mb);

// Buckets of `bucket` elements (rounded up to a multiple of dp; 0: one bucket for the whole
// buffer) over a buffer of `total` elements, counted from its end; replica `rank` of `dp`.
ChunkShards plan_shards(std::size_t total, std::size_t bucket, int dp, int rank);

// Whether bucket `p` does not divide by dp (its gathers go through a padded buffer).
bool padded(const ShardPiece& p, int dp);
// Elements of that buffer: the largest padded bucket's dp blocks (0 when every one divides).
std::size_t pad_elements(const ChunkShards& shards, int dp);

// plan_shards' state_size and pad_elements without laying the buckets out: the memory estimate
// asks it of every stage of every layout the planner prices, with thousands of buckets each.
struct ShardSizes {
  std::size_t state = 0, pad = 0;
};
ShardSizes shard_sizes(std::size_t total, std::size_t bucket, int dp);

} // namespace gridlm::engine
