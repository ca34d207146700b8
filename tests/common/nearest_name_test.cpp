// nearest_name(): the "did you mean ...?" of unknown ds_config keys and command-line flags.
#include <gtest/gtest.h>

#include "common/common.h"

namespace tierzero {
namespace {

TEST(NearestName, EditDistanceAndTheLimit) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("Stage", "stage"), 0u);
  EXPECT_EQ(nearest_name("offload_optimzer", {"offload_param", "offload_optimizer"}), "offload_optimizer");
  EXPECT_EQ(nearest_name("zero_optimisation", {"zero_optimization", "optimizer"}), "zero_optimization");
  EXPECT_FALSE(nearest_name("bogus", {"stage", "sub_group_size"}).has_value());
  EXPECT_FALSE(nearest_name("x", {}).has_value());
}

}  // namespace
}  // namespace tierzero
