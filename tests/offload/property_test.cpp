// A seeded random walk of thousands of fetch / write / writeback / release / prefetch operations
// over shards homed in every tier, under budgets tight enough to evict all the time. Every byte
// read is checked against a shadow copy of what the shard must hold; a mismatch names the seed,
// the operation index, the shard, the tier and the first differing byte. The AsyncCopies walks
// run the host-memory GPU tier with copies still in flight after they are queued (as on a GPU).

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <string>

#include "offload/testing/host_copy_latency.h"
#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using testing::first_difference;
using testing::read_view;
using testing::write_view;

struct Model {
  std::vector<uint8_t> committed;  // what the shard holds
  std::vector<uint8_t> pending;    // what the write hold holds
  bool held = false;
  Tier tier = Tier::kPinned;
  bool write = false;
  bool written_back = false;  // since the write hold began; no writes are made after it
};

class PropertyWalk {
 public:
  PropertyWalk(TierManager& tm, uint64_t seed) : tm_(tm), rng_(seed), seed_(seed) {}

  void add(const std::string& id, uint64_t bytes, Tier home) {
    ASSERT_OK(tm_.register_shard({id, bytes, ElementType::kU8, home}));
    ids_.push_back(id);
    model_[id].committed.assign(bytes, 0);
  }

  void step() {
    const std::string& id = ids_[rng_() % ids_.size()];
    Model& m = model_[id];
    ++op_;
    SCOPED_TRACE("seed " + std::to_string(seed_) + ", operation " + std::to_string(op_) + " on shard " + id);
    if (!m.held) {
      switch (rng_() % 5) {
        case 0:
        case 1: fetch(id, m, Access::kRead); break;
        case 2: fetch(id, m, Access::kWrite); break;
        case 3: prefetch(); break;
        case 4: ASSERT_OK(tm_.writeback(id).get()); break;  // nothing held: no change
      }
      return;
    }
    switch (rng_() % 6) {
      case 0:
      case 1:
        if (m.write && !m.written_back && m.tier != Tier::kNvme) scribble(id, m);
        break;
      case 2: {
        if (!m.write) break;
        Status s = tm_.writeback(id).get();
        ASSERT_OK(s);
        m.committed = m.pending;
        m.written_back = true;
        break;
      }
      case 3: {  // a fetch that breaks the hold rules is refused and changes nothing
        const Tier other = static_cast<Tier>((static_cast<int>(m.tier) + 1) % kTierCount);
        EXPECT_EQ(tm_.fetch(id, other).get().status().code(), ErrorCode::kInvalidArgument);
        break;
      }
      default: release(id, m); break;
    }
  }

  void release_all() {
    for (const std::string& id : ids_) {
      if (model_[id].held) release(id, model_[id]);
    }
  }

  // Reads every shard in every tier that has a budget.
  void check_everything(bool has_gpu) {
    for (const std::string& id : ids_) {
      for (Tier t : {Tier::kGpu, Tier::kPinned}) {
        if (t == Tier::kGpu && !has_gpu) continue;
        Result<ShardView> v = tm_.fetch(id, t).get();
        ASSERT_OK(v);
        EXPECT_EQ(first_difference(model_[id].committed, read_view(*v)), "")
            << "seed " << seed_ << ", final check of shard " << id << " in " << tier_name(t);
        ASSERT_OK(tm_.release(id).get());
      }
    }
  }

  int verified() const { return verified_; }

 private:
  Tier random_tier() { return static_cast<Tier>(rng_() % kTierCount); }

  void fetch(const std::string& id, Model& m, Access access) {
    Tier tier = random_tier();
    if (access == Access::kWrite && tier == Tier::kNvme) tier = Tier::kPinned;
    Result<ShardView> v = tm_.fetch(id, tier, access).get();
    if (!v.ok()) {  // tiers full of held copies: refused, nothing changed
      ASSERT_EQ(v.status().code(), ErrorCode::kOutOfSpace) << v.status().to_string();
      return;
    }
    ASSERT_EQ(v->bytes, m.committed.size());
    if (tier != Tier::kNvme) {
      ASSERT_EQ(first_difference(m.committed, read_view(*v)), "")
          << (access == Access::kWrite ? "write " : "read ") << "fetch to " << tier_name(tier) << " (version "
          << v->version << ", " << v->bytes << " bytes)";
      ++verified_;
    }
    m.held = true;
    m.tier = tier;
    m.write = access == Access::kWrite;
    m.written_back = false;
    m.pending = m.committed;
    views_[id] = *v;
  }

  void scribble(const std::string& id, Model& m) {
    const uint64_t n = m.pending.size();
    const uint64_t off = rng_() % n;
    const uint64_t len = 1 + rng_() % (n - off);
    std::vector<uint8_t> bytes(len);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng_());
    write_view(views_[id], off, bytes.data(), len);
    std::copy(bytes.begin(), bytes.end(), m.pending.begin() + off);
  }

  void release(const std::string& id, Model& m) {
    Status s = tm_.release(id).get();
    ASSERT_OK(s);
    if (m.write && !m.written_back) m.committed = m.pending;
    m.held = false;
  }

  void prefetch() {
    std::vector<std::string> some;
    for (int i = 0; i < 3; ++i) some.push_back(ids_[rng_() % ids_.size()]);
    ASSERT_OK(tm_.prefetch(some, random_tier()).get());
  }

  TierManager& tm_;
  std::mt19937_64 rng_;
  std::vector<std::string> ids_;
  std::map<std::string, Model> model_;
  std::map<std::string, ShardView> views_;
  int verified_ = 0;
  uint64_t seed_;
  uint64_t op_ = 0;
};

struct Walk {
  uint64_t seed;
  uint32_t host_copy_latency_us;  // nonzero: host-memory GPU tier with asynchronous copies
};

void PrintTo(const Walk& w, std::ostream* os) {
  *os << "seed " << w.seed << ", copy latency " << w.host_copy_latency_us << " us";
}

class PropertyTest : public ::testing::TestWithParam<Walk> {};

TEST_P(PropertyTest, RandomOperationsKeepEveryByte) {
  test_support::ScratchDir dir;
  auto io = testing::make_io();
  ASSERT_TRUE(io);
  TierBudgets b = testing::small_budgets(dir.path(), 1 << 20, (768 << 10) + (1536 << 10), 12 << 20);
  b.nvme_paths = {dir.path(), dir.path()};  // two stripes
  b.swap_file_prefix = "walk";
  std::optional<testing::ScopedHostCopyLatency> latency;
  if (GetParam().host_copy_latency_us > 0) {
    b.device = DeviceChoice::kHost;
    latency.emplace(std::chrono::microseconds(GetParam().host_copy_latency_us));
  }
  auto m = TierManager::create(b, io.get());
  ASSERT_OK(m);
  TierManager& tm = **m;

  const uint64_t seed = GetParam().seed;
  PropertyWalk walk(tm, seed);
  std::mt19937_64 sizes(seed * 31 + 1);
  const Tier homes[] = {Tier::kNvme, Tier::kNvme, Tier::kPinned, Tier::kGpu};
  for (int i = 0; i < 20; ++i) {
    const uint64_t bytes = 1000 + sizes() % (200 << 10);
    walk.add("layer" + std::to_string(i) + "/w", bytes, homes[i % 4]);
  }
  if (seed % 2 == 0) {  // half the seeds also run with a recorded trace driving prefetch/eviction
    tm.begin_trace();
    for (int i = 0; i < 200; ++i) walk.step();
    tm.end_trace();
  }
  for (int i = 0; i < 2500; ++i) {
    walk.step();
    if (::testing::Test::HasFatalFailure()) return;
  }
  walk.release_all();
  walk.check_everything(true);
  EXPECT_GT(walk.verified(), 300);  // reads compared byte for byte
}

INSTANTIATE_TEST_SUITE_P(Seeds, PropertyTest, ::testing::Values(Walk{1, 0}, Walk{2, 0}, Walk{3, 0}, Walk{4, 0}));
INSTANTIATE_TEST_SUITE_P(AsyncCopies, PropertyTest, ::testing::Values(Walk{5, 100}, Walk{6, 100}));

}  // namespace
}  // namespace tierzero::offload
