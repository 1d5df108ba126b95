// The bucket and ZeRO-1 shard plan (engine/dp_shards): buckets cover the buffer once, from its
// end, whole but the last; the replicas' owned parts partition every bucket, each within its
// padded block; the shard layout holds every owned part without overlap. Over sizes that do
// not divide by dp, buckets smaller than dp, one whole-buffer bucket, and dp of 1 to 5.
#include <gtest/gtest.h>

#include <vector>

#include "engine/dp_shards.hpp"

using namespace gridlm::engine;

namespace {

void check_plan(std::size_t total, std::size_t bucket, int dp) {
  SCOPED_TRACE("total " + std::to_string(total) + ", bucket " + std::to_string(bucket) + ", dp " +
               std::to_string(dp));
  std::vector<int> owners(total, 0);
  std::vector<ChunkShards> plans;
  for (int r = 0; r < dp; ++r)
    plans.push_back(plan_shards(total, bucket, dp, r));
  const ChunkShards& first = plans.front();
  std::size_t end = total;
  for (std::size_t i = 0; i < first.pieces.size(); ++i) {
    const ShardPiece& p = first.pieces[i];
    EXPECT_EQ(p.begin + p.size, end) << "bucket " << i << " does not meet the one after it";
    if (bucket > 0 && i + 1 < first.pieces.size()) {
      EXPECT_EQ(p.size % std::size_t(dp), 0u) << "a whole bucket divides by dp";
      EXPECT_GE(p.size, bucket);
    }
    EXPECT_GE(p.block * std::size_t(dp), p.size);
    EXPECT_LT((p.block - 1) * std::size_t(dp), p.size);
    end = p.begin;
    for (int r = 0; r < dp; ++r) {
      const ShardPiece& q = plans[std::size_t(r)].pieces[i];
      EXPECT_EQ(q.begin, p.begin);
      EXPECT_EQ(q.size, p.size);
      EXPECT_LE(q.own_size, q.block);
      EXPECT_GE(q.own_begin, q.begin);
      EXPECT_LE(q.own_begin + q.own_size, q.begin + q.size);
      for (std::size_t e = q.own_begin; e < q.own_begin + q.own_size; ++e)
        ++owners[e];
    }
  }
  EXPECT_EQ(end, 0u) << "the buckets do not reach the buffer's start";
  for (std::size_t e = 0; e < total; ++e)
    ASSERT_EQ(owners[e], 1) << "element " << e << " has " << owners[e] << " owners";
  for (const ChunkShards& plan : plans) {
    std::size_t state = 0;
    for (const ShardPiece& p : plan.pieces) {
      EXPECT_EQ(p.state, state);
      state += p.block;
    }
    EXPECT_EQ(plan.state_size, state);
  }
}

} // namespace

TEST(DpShards, EveryElementHasOneOwner) {
  for (int dp = 1; dp <= 5; ++dp) {
    for (std::size_t total : {1u, 2u, 7u, 64u, 1001u, 4096u}) {
      for (std::size_t bucket : {0u, 1u, 3u, 100u, 1024u, 10000u})
        check_plan(total, bucket, dp);
    }
  }
}

TEST(DpShards, OneBucketWhenNoSizeIsGiven) {
  const ChunkShards s = plan_shards(1001, 0, 4, 3);
  ASSERT_EQ(s.pieces.size(), 1u);
  EXPECT_EQ(s.pieces[0].block, 251u);
  EXPECT_EQ(s.pieces[0].own_begin, 753u);
  EXPECT_EQ(s.pieces[0].own_size, 248u); // the last replica's part is the short one
}

// The memory estimate's shortcut gives what laying the buckets out gives: the state's size and
// the pad buffer's, for buffers and buckets that do and do not divide by dp.
TEST(DpShards, SizesWithoutTheLayoutAreTheLayouts) {
  for (const int dp : {1, 2, 3, 4, 7})
    for (const std::size_t total : {0, 1, 5, 96, 1000, 1001, 4099})
      for (const std::size_t bucket : {0, 1, 3, 64, 100, 999, 5000}) {
        const ChunkShards laid = plan_shards(total, bucket, dp, 0);
        const ShardSizes s = shard_sizes(total, bucket, dp);
        EXPECT_EQ(s.state, laid.state_size)
            << total << " in buckets of " << bucket << ", dp " << dp;
        EXPECT_EQ(s.pad, pad_elements(laid, dp))
            << total << " in buckets of " << bucket << ", dp " << dp;
      }
}
