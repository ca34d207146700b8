// A test fixture parameterised over backend × O_DIRECT/buffered × fixed buffers on/off.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "nvme/io_engine.h"
#include "test_env.h"

namespace tierzero::nvme::testing {

struct EngineParams {
  Backend backend;
  bool direct;
  bool fixed_buffers;
};

// Every combination, for INSTANTIATE_TEST_SUITE_P.
std::vector<EngineParams> all_engine_params();
// "io_uring_direct_fixed" etc.
std::string engine_param_name(const ::testing::TestParamInfo<EngineParams>& info);

class EngineTest : public ::testing::TestWithParam<EngineParams> {
 protected:
  void SetUp() override;
  // The parameter's config with small pieces (64 KiB × depth 8), so modest sizes span many.
  IoConfig base_config() const;
  // Replaces the engine; skips the test when the backend is not available here.
  void make_engine(const IoConfig& config);
  // Opens dir_/name through the engine; fails the test on error.
  FileRef open(const std::string& name, OpenMode mode);
  // Writes `data` to dir_/name through the engine, then reopens it for reading.
  FileRef make_file(const std::string& name, const std::vector<uint8_t>& data);

  TestDir dir_;
  std::unique_ptr<IoEngine> engine_;
};

}  // namespace tierzero::nvme::testing
