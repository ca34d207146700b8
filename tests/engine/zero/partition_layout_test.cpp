// DeepSpeed's padding rules for ZeRO's flat partitions (partition_layout.h).
#include "engine/zero/partition_layout.h"

#include <gtest/gtest.h>

namespace tierzero::engine {
namespace {

TEST(FlatGroupLayout, PadsToTwiceWorldSizeAndSplitsEvenly) {
  FlatGroupLayout layout = make_flat_group_layout({"a", "b"}, {{3, 5}, {7}}, /*stage=*/2, /*world_size=*/4);
  EXPECT_EQ(layout.numel, 22);
  EXPECT_EQ(layout.padded_numel, 24);  // multiple of 2 * 4
  EXPECT_EQ(layout.partition_numel, 6);
  EXPECT_EQ(layout.slots[1].offset, 15);
  EXPECT_EQ(layout.partition_begin(3), 18);
}

TEST(FlatGroupLayout, StageZeroIsOneUnpaddedPartition) {
  FlatGroupLayout layout = make_flat_group_layout({"a"}, {{3}}, /*stage=*/0, /*world_size=*/4);
  EXPECT_EQ(layout.padded_numel, 3);
  EXPECT_EQ(layout.partition_numel, 3);
}

TEST(FlatGroupLayout, OneRankStillPadsToTwoElementsAsDeepSpeedDoes) {
  FlatGroupLayout layout = make_flat_group_layout({"a"}, {{3}}, /*stage=*/1, /*world_size=*/1);
  EXPECT_EQ(layout.partition_count, 1);
  EXPECT_EQ(layout.padded_numel, 4);  // multiple of 2 * 1, as the checkpoint's layout expects
  EXPECT_EQ(layout.partition_numel, 4);
}

TEST(ShardedLayout, EachParameterPaddedToWorldSize) {
  ShardedLayout layout = make_sharded_layout({"a", "b", "c"}, {{10}, {2, 2}, {1}}, 4);
  EXPECT_EQ(layout.slots[0].shard_numel, 3);  // ceil(10 / 4)
  EXPECT_EQ(layout.slots[1].shard_numel, 1);
  EXPECT_EQ(layout.slots[2].shard_numel, 1);
  EXPECT_EQ(layout.slots[1].shard_offset, 3);
  EXPECT_EQ(layout.shard_numel, 5);
  EXPECT_EQ(layout.valid_numel(layout.slots[0], 3), 1);  // elements 9..11, only 9 is real
  EXPECT_EQ(layout.valid_numel(layout.slots[2], 1), 0);
}

}  // namespace
}  // namespace tierzero::engine
