#include "engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::nvme::testing {

std::vector<EngineParams> all_engine_params() {
  std::vector<EngineParams> out;
  for (Backend b : {Backend::kIoUring, Backend::kLibaio, Backend::kSync}) {
    for (bool direct : {true, false}) {
      for (bool fixed : {true, false}) out.push_back({b, direct, fixed});
    }
  }
  return out;
}

std::string engine_param_name(const ::testing::TestParamInfo<EngineParams>& info) {
  return std::string(backend_name(info.param.backend)) + (info.param.direct ? "_direct" : "_buffered") +
         (info.param.fixed_buffers ? "_fixed" : "_plain");
}

void EngineTest::SetUp() { make_engine(base_config()); }

IoConfig EngineTest::base_config() const {
  IoConfig config;
  config.backend = GetParam().backend;
  config.use_direct = GetParam().direct;
  config.register_buffers = GetParam().fixed_buffers;
  config.block_size = 64 << 10;
  config.queue_depth = 8;
  return config;
}

void EngineTest::make_engine(const IoConfig& config) {
  engine_.reset();
  Result<std::unique_ptr<IoEngine>> created = IoEngine::create(config);
  if (!created.ok()) GTEST_SKIP() << "backend unavailable here: " << created.status().to_string();
  engine_ = std::move(created).value();
}

FileRef EngineTest::open(const std::string& name, OpenMode mode) {
  Result<FileRef> f = engine_->open(dir_.file(name), OpenOptions{mode, 0, true});
  EXPECT_OK(f);
  if (f.ok() && GetParam().direct) {
    EXPECT_TRUE((*f)->direct()) << "O_DIRECT refused on " << dir_.path();
  }
  return f.ok() ? *f : nullptr;
}

FileRef EngineTest::make_file(const std::string& name, const std::vector<uint8_t>& data) {
  FileRef w = open(name, OpenMode::kWrite);
  if (!w) return nullptr;
  Status s = write_sync(*engine_, w, 0, data.data(), data.size());
  EXPECT_OK(s);
  return open(name, OpenMode::kRead);
}

}  // namespace tierzero::nvme::testing
