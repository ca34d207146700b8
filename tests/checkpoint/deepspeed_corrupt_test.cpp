// One corrupt DeepSpeed checkpoint per error class, each refused with its own message.
// Byte-level damage is applied to copies of a good fixture with a seeded RNG; damage in meaning
// (a forbidden global, shapes that disagree with the partitions) comes from the generator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "tests/checkpoint/deepspeed_fixtures.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {
namespace fs = std::filesystem;
using testing::deepspeed_fixtures;

constexpr const char* kRank0Optim = "global_step3/zero_pp_rank_0_mp_rank_00_optim_states.pt";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

uint32_t le(const std::vector<uint8_t>& b, size_t at, int width) {
  uint32_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = v << 8 | b[at + i];
  return v;
}

// A central-directory entry of a small (non-zip64) archive: where its header and name are.
struct CentralEntry {
  size_t header;  // offset of the 46-byte central header
  std::string name;
};

std::vector<CentralEntry> central_entries(const std::vector<uint8_t>& b) {
  size_t end = b.size() - 22;
  while (le(b, end, 4) != 0x06054b50) --end;
  std::vector<CentralEntry> entries;
  size_t at = le(b, end + 16, 4);
  for (uint32_t i = 0; i < le(b, end + 10, 2); ++i) {
    const size_t name_len = le(b, at + 28, 2);
    entries.push_back({at, std::string(b.begin() + at + 46, b.begin() + at + 46 + name_len)});
    at += 46 + name_len + le(b, at + 30, 2) + le(b, at + 32, 2);
  }
  return entries;
}

// Copies fixture `name` to a scratch folder, applies `damage` to FILE (relative), and returns the
// status of opening it.
class Corrupted {
 public:
  explicit Corrupted(const std::string& fixture) {
    testing::copy_tree(deepspeed_fixtures().dir + "/" + fixture, dir());
  }
  std::string dir() const { return scratch_.path() + "/ckpt"; }
  std::string file(const std::string& rel) const { return dir() + "/" + rel; }
  void patch(const std::string& rel, const std::function<void(std::vector<uint8_t>&)>& damage) const {
    std::vector<uint8_t> bytes = read_bytes(file(rel));
    damage(bytes);
    write_bytes(file(rel), bytes);
  }
  Status open() const {
    auto source = open_deepspeed_checkpoint(dir(), "");
    return source.ok() ? Status() : source.status();
  }

 private:
  test_support::ScratchDir scratch_{"tierzero-ds-test"};
};

class DeepSpeedCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& fx = deepspeed_fixtures();
    ASSERT_TRUE(fx.error.empty()) << fx.error;
    if (fx.dir.empty()) GTEST_SKIP() << fx.skip_reason;
  }
};

TEST_F(DeepSpeedCorrupt, TruncatedZip) {
  Corrupted c("s3_w2_fp16");
  std::mt19937_64 rng(101);
  c.patch(kRank0Optim, [&](std::vector<uint8_t>& b) {
    b.resize(std::uniform_int_distribution<size_t>(b.size() / 2, b.size() - 1)(rng));
  });
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "truncated zip");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "zero_pp_rank_0_mp_rank_00_optim_states.pt");
}

TEST_F(DeepSpeedCorrupt, BadCentralDirectory) {
  Corrupted c("s3_w2_fp16");
  std::mt19937_64 rng(102);
  c.patch(kRank0Optim, [&](std::vector<uint8_t>& b) {
    const auto entries = central_entries(b);
    const size_t victim = std::uniform_int_distribution<size_t>(0, entries.size() - 1)(rng);
    b[entries[victim].header] ^= 0xff;
  });
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "bad central directory");
}

TEST_F(DeepSpeedCorrupt, CompressedEntry) {
  Corrupted c("s2_w2_bf16");
  c.patch("global_step3/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt", [](std::vector<uint8_t>& b) {
    for (const auto& e : central_entries(b)) {
      if (e.name.ends_with("/data.pkl")) b[e.header + 10] = 8;  // method: deflate
    }
  });
  EXPECT_ERROR(c.open(), ErrorCode::kUnsupported, "is compressed (method 8)");
}

TEST_F(DeepSpeedCorrupt, UnknownPickleOpcode) {
  Corrupted c("s3_w2_fp16");
  c.patch(kRank0Optim, [](std::vector<uint8_t>& b) {
    for (const auto& e : central_entries(b)) {
      if (!e.name.ends_with("/data.pkl")) continue;
      const size_t local = le(b, e.header + 42, 4);
      const size_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
      ASSERT_EQ(b[data], 0x80);  // PROTO 2, then the root's first opcode at byte 2
      b[data + 2] = 0xff;
    }
  });
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "byte 2 (file offset");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "unknown pickle opcode 0xff");
}

TEST_F(DeepSpeedCorrupt, ForbiddenGlobalWhereATensorBelongs) {
  Corrupted c("bad_global_s3_w2");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "fp32_flat_groups[1] is global posix.system where a tensor");
}

TEST_F(DeepSpeedCorrupt, StorageKeyMissing) {
  Corrupted c("s3_w2_fp16");
  c.patch(kRank0Optim, [](std::vector<uint8_t>& b) {
    for (const auto& e : central_entries(b)) {
      const size_t at = e.name.find("/data/");
      if (at != std::string::npos) b[e.header + 46 + at + 1] = 'D';  // PREFIX/Data/N: no storage entries left
    }
  });
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "has no zip entry");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "storage missing");
}

TEST_F(DeepSpeedCorrupt, StorageOutOfRange) {
  Corrupted c("s3_w2_fp16");
  c.patch(kRank0Optim, [](std::vector<uint8_t>& b) {
    for (const auto& e : central_entries(b)) {
      const uint32_t size = le(b, e.header + 24, 4);
      if (e.name.find("/data/") == std::string::npos || size < 4) continue;
      for (size_t field : {e.header + 20, e.header + 24}) {  // compressed and uncompressed sizes
        const uint32_t smaller = size - 4;
        std::memcpy(&b[field], &smaller, 4);
      }
    }
  });
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "storage out of range");
}

TEST_F(DeepSpeedCorrupt, MissingRankFile) {
  Corrupted c("s3_w3_bf16");
  fs::remove(c.file("global_step3/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"));
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "missing rank file");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "rank 1 of 3");
}

TEST_F(DeepSpeedCorrupt, WorldSizeMismatch) {
  Corrupted c("s3_w2_fp16");
  fs::copy_file(c.file("global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt"),
                c.file("global_step3/zero_pp_rank_2_mp_rank_00_optim_states.pt"));
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "world size mismatch: partition_count says 2 ranks");
}

TEST_F(DeepSpeedCorrupt, ShapesInconsistentWithPartitions) {
  Corrupted c("bad_shapes_s3_w2");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "shapes inconsistent with partition sizes");
}

TEST_F(DeepSpeedCorrupt, Stage2ShapesInconsistentWithPartitions) {
  Corrupted c("bad_shapes_s2_w2");
  EXPECT_ERROR(c.open(), ErrorCode::kCorrupt, "shapes inconsistent with partition sizes");
}

// Seeded random damage anywhere in a rank file (zip records, pickle, storages): each open either
// fails with a status or yields readable tensors. And the pickle cut short (every fifth byte) is
// always refused.
TEST_F(DeepSpeedCorrupt, RandomDamageIsRefusedOrHarmless) {
  Corrupted c("s3_w2_fp16");
  const std::vector<uint8_t> original = read_bytes(c.file(kRank0Optim));
  std::mt19937_64 rng(103);
  int refused = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<uint8_t> bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    write_bytes(c.file(kRank0Optim), bytes);
    auto source = open_deepspeed_checkpoint(c.dir(), "");
    if (!source.ok()) {
      ++refused;
      EXPECT_FALSE(source.status().message().empty());
      continue;
    }
    for (size_t t = 0; t < (*source)->tensors().size(); ++t) {
      std::vector<float> out(static_cast<size_t>((*source)->tensors()[t].numel()));
      (void)(*source)->read_fp32(t, out);
    }
  }
  EXPECT_GT(refused, 0);
  for (const auto& e : central_entries(original)) {
    if (!e.name.ends_with("/data.pkl")) continue;
    const size_t local = le(original, e.header + 42, 4);
    const size_t data = local + 30 + le(original, local + 26, 2) + le(original, local + 28, 2);
    const size_t size = le(original, e.header + 24, 4);
    for (size_t cut = 0; cut < size; cut += 5) {  // the pickle cut short every 5 bytes, the zip intact
      std::vector<uint8_t> bytes = original;
      std::fill(bytes.begin() + data + cut, bytes.begin() + data + size, uint8_t{'.'});
      bytes[data + cut] = 0xff;
      write_bytes(c.file(kRank0Optim), bytes);
      EXPECT_ERROR(open_deepspeed_checkpoint(c.dir(), ""), ErrorCode::kCorrupt, kRank0Optim) << "cut at " << cut;
    }
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
