// DeepSpeed's padding rules for ZeRO's flat partitions (partition_layout.h).
#include "engine/zero/internal/partition_layout.h"

#include <gtest/gtest.h>

#include <ostream>
#include <vector>

namespace tierzero::engine {

// gtest's printer for the runs a failed expectation shows.
void PrintTo(const PartitionRun& r, std::ostream* os) {
  *os << "{rank " << r.rank << ", partition_offset " << r.partition_offset << ", param_offset " << r.param_offset
      << ", numel " << r.numel << "}";
}

namespace {

TEST(FlatGroupLayout, PadsToTwiceWorldSizeAndSplitsEvenly) {
  FlatGroupLayout layout = make_flat_group_layout({{"a", {3, 5}}, {"b", {7}}}, /*stage=*/2, /*world_size=*/4);
  EXPECT_EQ(layout.numel, 22);
  EXPECT_EQ(layout.padded_numel, 24);  // multiple of 2 * 4
  EXPECT_EQ(layout.partition_numel, 6);
  EXPECT_EQ(layout.slots[1].offset, 15);
  EXPECT_EQ(layout.partition_begin(3), 18);
}

TEST(FlatGroupLayout, StageZeroIsOneUnpaddedPartition) {
  FlatGroupLayout layout = make_flat_group_layout({{"a", {3}}}, /*stage=*/0, /*world_size=*/4);
  EXPECT_EQ(layout.padded_numel, 3);
  EXPECT_EQ(layout.partition_numel, 3);
}

TEST(FlatGroupLayout, OneRankStillPadsToTwoElementsAsDeepSpeedDoes) {
  FlatGroupLayout layout = make_flat_group_layout({{"a", {3}}}, /*stage=*/1, /*world_size=*/1);
  EXPECT_EQ(layout.partition_count, 1);
  EXPECT_EQ(layout.padded_numel, 4);  // multiple of 2 * 1, as the checkpoint's layout expects
  EXPECT_EQ(layout.partition_numel, 4);
}

TEST(ShardedLayout, EachParameterPaddedToWorldSize) {
  ShardedLayout layout = make_sharded_layout({{"a", {10}}, {"b", {2, 2}}, {"c", {1}}}, 4);
  EXPECT_EQ(layout.slots[0].shard_numel, 3);  // ceil(10 / 4)
  EXPECT_EQ(layout.slots[1].shard_numel, 1);
  EXPECT_EQ(layout.slots[2].shard_numel, 1);
  EXPECT_EQ(layout.slots[1].shard_offset, 3);
  EXPECT_EQ(layout.shard_numel, 5);
}

// Partitions of 6 elements: b (7 elements at flat 15..21) straddles ranks 2 and 3.
TEST(PartitionRuns, FlatRangeSplitsAtPartitionEnds) {
  FlatGroupLayout layout = make_flat_group_layout({{"a", {3, 5}}, {"b", {7}}}, /*stage=*/2, /*world_size=*/4);
  EXPECT_EQ(locate(layout, layout.slots[1], 0, 7), (std::vector<PartitionRun>{{2, 3, 0, 3}, {3, 0, 3, 4}}));
  EXPECT_EQ(locate(layout, layout.slots[0], 5, 8),  // a's flat 5..12: ranks 0 (5), 1 (6..11), 2 (12)
            (std::vector<PartitionRun>{{0, 5, 5, 1}, {1, 0, 6, 6}, {2, 0, 12, 1}}));
  EXPECT_EQ(locate(layout, layout.slots[1], 4, 2), (std::vector<PartitionRun>{{3, 1, 4, 2}}));
  EXPECT_TRUE(locate(layout, layout.slots[1], 7, 0).empty());
}

TEST(PartitionRuns, StageZeroIsAllRankZero) {
  FlatGroupLayout layout = make_flat_group_layout({{"a", {3, 5}}, {"b", {7}}}, /*stage=*/0, /*world_size=*/4);
  EXPECT_EQ(locate(layout, layout.slots[1], 2, 5), (std::vector<PartitionRun>{{0, 17, 2, 5}}));
}

// a: 10 elements, 3 per rank (rank 3 holds 9 and two padding elements); b starts at shard offset 3.
TEST(PartitionRuns, ShardedRangeSplitsAtShardEnds) {
  ShardedLayout layout = make_sharded_layout({{"a", {10}}, {"b", {2, 3}}}, 4);
  EXPECT_EQ(locate(layout.slots[0], 2, 8),
            (std::vector<PartitionRun>{{0, 2, 2, 1}, {1, 0, 3, 3}, {2, 0, 6, 3}, {3, 0, 9, 1}}));
  EXPECT_EQ(locate(layout.slots[1], 0, 6),  // 2 per rank, each at shard offset 3
            (std::vector<PartitionRun>{{0, 3, 0, 2}, {1, 3, 2, 2}, {2, 3, 4, 2}}));
  EXPECT_EQ(locate(layout.slots[1], 3, 1), (std::vector<PartitionRun>{{1, 4, 3, 1}}));
}

TEST(PartitionRuns, UnknownNameIsAnError) {
  ShardedLayout layout = make_sharded_layout({{"a", {10}}}, 2);
  EXPECT_THROW(slot_named(layout.slots, "z"), Error);
  EXPECT_EQ(slot_named(layout.slots, "a").numel, 10);
}

}  // namespace
}  // namespace tierzero::engine
