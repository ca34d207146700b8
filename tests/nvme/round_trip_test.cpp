// Round trips of random data through every backend, O_DIRECT and buffered, fixed buffers on/off.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>

#include "nvme/io_engine.h"
#include "test_env.h"

namespace tierzero::nvme {
namespace {

using testing::random_bytes;
using testing::TestDir;

struct RoundTripParams {
  Backend backend;
  bool direct;
  bool fixed_buffers;
};

std::string param_name(const ::testing::TestParamInfo<RoundTripParams>& info) {
  return std::string(backend_name(info.param.backend)) + (info.param.direct ? "_direct" : "_buffered") +
         (info.param.fixed_buffers ? "_fixed" : "_plain");
}

class RoundTripTest : public ::testing::TestWithParam<RoundTripParams> {
 protected:
  void SetUp() override {
    IoConfig config;
    config.backend = GetParam().backend;
    config.use_direct = GetParam().direct;
    config.register_buffers = GetParam().fixed_buffers;
    config.block_size = 64 << 10;
    config.queue_depth = 8;
    make_engine(config);
  }

  void make_engine(const IoConfig& config) {
    Result<std::unique_ptr<IoEngine>> created = IoEngine::create(config);
    if (!created.ok()) GTEST_SKIP() << "backend unavailable here: " << created.status().to_string();
    engine_ = std::move(created).value();
  }

  FileRef open(const std::string& name, OpenMode mode) {
    Result<FileRef> f = engine_->open(dir_.file(name), OpenOptions{mode, 0, true});
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return f.ok() ? *f : nullptr;
  }

  TestDir dir_;
  std::unique_ptr<IoEngine> engine_;
};

TEST_P(RoundTripTest, AlignedWholeFile) {
  const uint64_t bytes = 1 << 20;
  auto data = random_bytes(bytes, 1);
  AlignedBuffer buf = allocate_aligned(bytes);
  std::memcpy(buf.get(), data.data(), bytes);
  ASSERT_TRUE(engine_->register_buffer(buf.get(), bytes).ok());
  FileRef f = open("aligned", OpenMode::kReadWrite);
  ASSERT_TRUE(f);
  if (GetParam().direct) {
    EXPECT_TRUE(f->direct()) << "O_DIRECT refused on " << dir_.path();
  }
  ASSERT_TRUE(write_sync(*engine_, f, 0, buf.get(), bytes, true).ok());
  std::memset(buf.get(), 0, bytes);
  Status s = read_sync(*engine_, f, 0, buf.get(), bytes);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(0, std::memcmp(buf.get(), data.data(), bytes));
  EXPECT_EQ(testing::read_plain_file(f->path()), data);
  ASSERT_TRUE(engine_->unregister_buffer(buf.get()).ok());
}

TEST_P(RoundTripTest, UnalignedOffsetsLengthsAndBuffers) {
  const uint64_t file_bytes = 300000;
  auto base = random_bytes(file_bytes, 2);
  FileRef f = open("unaligned", OpenMode::kReadWrite);
  ASSERT_TRUE(f);
  ASSERT_TRUE(write_sync(*engine_, f, 0, base.data(), file_bytes).ok());
  struct Case {
    uint64_t offset, length, mem_skew;
  };
  for (Case c : {Case{1, 1, 1}, Case{511, 2, 3}, Case{4095, 4098, 0}, Case{4096, 8192, 7}, Case{100, 70000, 0},
                 Case{131072, 65536, 1}, Case{0, 299999, 5}, Case{299000, 1000, 0}}) {
    SCOPED_TRACE("offset " + std::to_string(c.offset) + " length " + std::to_string(c.length));
    auto patch = random_bytes(c.length, c.offset + c.length);
    AlignedBuffer mem = allocate_aligned(c.length + 8);
    std::memcpy(mem.get() + c.mem_skew, patch.data(), c.length);
    Status w = write_sync(*engine_, f, c.offset, mem.get() + c.mem_skew, c.length);
    ASSERT_TRUE(w.ok()) << w.to_string();
    std::memcpy(base.data() + c.offset, patch.data(), c.length);
    ASSERT_EQ(testing::read_plain_file(f->path()), base);
    std::vector<uint8_t> back(c.length + 2, 0xEE);
    Status r = read_sync(*engine_, f, c.offset, back.data() + 1, c.length);
    ASSERT_TRUE(r.ok()) << r.to_string();
    EXPECT_EQ(0, std::memcmp(back.data() + 1, patch.data(), c.length));
    EXPECT_EQ(back.front(), 0xEE);
    EXPECT_EQ(back.back(), 0xEE);
  }
}

std::vector<RoundTripParams> all_params() {
  std::vector<RoundTripParams> out;
  for (Backend b : {Backend::kIoUring, Backend::kLibaio, Backend::kSync}) {
    for (bool direct : {true, false}) {
      for (bool fixed : {true, false}) out.push_back({b, direct, fixed});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, RoundTripTest, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace tierzero::nvme
