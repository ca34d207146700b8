// ZeRO's partition arithmetic (common/internal/partition.h) against DeepSpeed's rules worked by hand, and
// the rank ranges tiling every whole exactly.
#include "common/common.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tierzero::partitioning {
namespace {

TEST(Stage3PieceNumel, IsCeilOfNumelOverWorldSize) {
  EXPECT_EQ(stage3_piece_numel(10, 4), 3u);
  EXPECT_EQ(stage3_piece_numel(8, 4), 2u);
  EXPECT_EQ(stage3_piece_numel(1, 4), 1u);
  EXPECT_EQ(stage3_piece_numel(0, 4), 0u);
  EXPECT_EQ(stage3_piece_numel(7, 1), 7u);
}

TEST(FlatPartition, PadsToAlignmentTimesWorldSizeAndSplitsEvenly) {
  EXPECT_EQ(padded_flat_numel(22, 4, kDeepSpeedAlignment), 24u);  // multiple of 2 * 4
  EXPECT_EQ(flat_partition_numel(22, 4, kDeepSpeedAlignment), 6u);
  EXPECT_EQ(padded_flat_numel(24, 4, kDeepSpeedAlignment), 24u);  // already aligned: no padding
  EXPECT_EQ(padded_flat_numel(13, 4, 1), 16u);
  EXPECT_EQ(flat_partition_numel(0, 4, kDeepSpeedAlignment), 0u);
}

TEST(FlatPartition, OneRankStillPadsToTwoElementsAsDeepSpeedDoes) {
  EXPECT_EQ(padded_flat_numel(3, 1, kDeepSpeedAlignment), 4u);
  EXPECT_EQ(flat_partition_numel(3, 1, kDeepSpeedAlignment), 4u);
}

TEST(RankRange, ClipsTheShareToTheWhole) {
  // 13 elements, 4 per rank: ranks hold [0,4) [4,8) [8,12) [12,13), and nothing past.
  EXPECT_EQ(rank_range(13, 4, 0).begin, 0u);
  EXPECT_EQ(rank_range(13, 4, 0).end, 4u);
  EXPECT_EQ(rank_range(13, 4, 3).begin, 12u);
  EXPECT_EQ(rank_range(13, 4, 3).size(), 1u);
  EXPECT_EQ(rank_range(13, 4, 4).size(), 0u);
  EXPECT_EQ(rank_range(13, 4, 4).begin, 13u);
  EXPECT_EQ(rank_range(0, 0, 2).size(), 0u);
}

// For every small whole and world size, the ranks' ranges of the stage 3 pieces and of the stage 1-2
// partitions follow each other without gap or overlap and cover the whole exactly.
TEST(RankRange, RangesOfAllRanksTileTheWholeForStage3AndFlatGroups) {
  for (uint64_t numel = 0; numel <= 40; ++numel) {
    for (uint32_t world = 1; world <= 9; ++world) {
      for (uint64_t share :
           {stage3_piece_numel(numel, world), flat_partition_numel(numel, world, kDeepSpeedAlignment)}) {
        ASSERT_GE(share * world, numel) << numel << " over " << world;
        uint64_t next = 0;
        for (uint32_t rank = 0; rank < world; ++rank) {
          const Range r = rank_range(numel, share, rank);
          ASSERT_EQ(r.begin, next) << numel << " over " << world << ", rank " << rank;
          ASSERT_LE(r.size(), share);
          next = r.end;
        }
        EXPECT_EQ(next, numel) << numel << " over " << world;
      }
    }
  }
}

}  // namespace
}  // namespace tierzero::partitioning
