// The recorded access order: cursor, next-use distances, and the prefetch window.
#include <gtest/gtest.h>

#include "offload/internal/access_trace.h"

namespace tierzero::offload {
namespace {

TEST(AccessTrace, RecordsThenReplaysCyclically) {
  AccessTrace t;
  EXPECT_EQ(t.next_use("a"), AccessTrace::kNever);
  t.begin();
  for (const char* id : {"a", "b", "c", "b"}) t.on_fetch(id, Tier::kGpu);
  EXPECT_FALSE(t.replaying());
  t.end();
  ASSERT_TRUE(t.replaying());
  EXPECT_EQ(t.next_use("a"), 0u);
  EXPECT_EQ(t.next_use("b"), 1u);
  EXPECT_EQ(t.next_use("c"), 2u);
  EXPECT_EQ(t.next_use("zz"), AccessTrace::kNever);
  t.on_fetch("a", Tier::kGpu);
  t.on_fetch("b", Tier::kGpu);  // cursor now at "c"
  EXPECT_EQ(t.next_use("c"), 0u);
  EXPECT_EQ(t.next_use("b"), 1u);
  EXPECT_EQ(t.next_use("a"), 2u);  // wraps into the next step
}

TEST(AccessTrace, UpcomingStopsAtTheByteBudget) {
  AccessTrace t;
  t.begin();
  for (const char* id : {"a", "b", "c", "d"}) t.on_fetch(id, Tier::kPinned);
  t.end();
  t.on_fetch("a", Tier::kPinned);
  auto bytes = [](const std::string&) { return uint64_t{100}; };
  auto next = t.upcoming(250, bytes);
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0]->id, "b");
  EXPECT_EQ(next[1]->id, "c");
  EXPECT_EQ(t.upcoming(0, bytes).size(), 1u);      // at least one entry
  EXPECT_EQ(t.upcoming(10000, bytes).size(), 4u);  // at most one cycle
}

}  // namespace
}  // namespace tierzero::offload
