// One damaged copy of a real DeepSpeed universal checkpoint (ds_to_universal.py's output in the
// corpus) per class of error the universal reader must refuse, each message naming the file, the
// byte where there is one, and the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <string_view>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/deepspeed/deepspeed_source.h"
#include "tests/checkpoint/deepspeed_fixtures.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCase = "w1_s2_bf16_tied_offload";  // a stage-2 conversion: dict fp32.pt files
constexpr const char* kParam = "model.norm.weight";

class UniversalCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.path() + "/universal";
    testing::copy_tree(std::string(TIERZERO_DEEPSPEED_CORPUS_DIR) + "/" + kCase + "/universal", dir_);
  }
  std::string param_file(const std::string& name, const std::string& param = kParam) const {
    return dir_ + "/global_step2/zero/" + param + "/" + name;
  }
  void expect_refused(ErrorCode code, std::initializer_list<std::string_view> parts) {
    const Status status = testing::convert_status(open_deepspeed_universal_checkpoint(dir_, ""), scratch_.file("out"),
                                                  ElementType::kBF16);
    for (std::string_view part : parts) EXPECT_ERROR(status, code, part);
  }

  test_support::ScratchDir scratch_{"tierzero-ds-test"};
  std::string dir_;
};

TEST_F(UniversalCorrupt, TagFolderMissing) {
  fs::rename(dir_ + "/global_step2", dir_ + "/elsewhere");
  expect_refused(ErrorCode::kNotFound, {"global_step2/zero does not exist", "latest_universal"});
}

TEST_F(UniversalCorrupt, Fp32FileTruncated) {
  fs::resize_file(param_file("fp32.pt"), 300);
  expect_refused(ErrorCode::kCorrupt, {kParam, "fp32.pt", "truncated zip"});
}

TEST_F(UniversalCorrupt, Fp32FileWithoutParam) {
  // zero/optimizer_state.pt, a dict of the optimizer's settings, stands in for the parameter.
  fs::copy_file(dir_ + "/global_step2/zero/optimizer_state.pt", param_file("fp32.pt"),
                fs::copy_options::overwrite_existing);
  expect_refused(ErrorCode::kCorrupt, {"fp32.pt", "a dict without a 'param' entry"});
}

TEST_F(UniversalCorrupt, ShapeOtherThanTheModelStatesFile) {
  // The embedding's fp32.pt copied over the norm's: 1536 elements where the model states file says 16.
  fs::copy_file(param_file("fp32.pt", "model.embed_tokens.weight"), param_file("fp32.pt"),
                fs::copy_options::overwrite_existing);
  expect_refused(ErrorCode::kCorrupt, {"fp32.pt", "1536 elements", "'model.norm.weight' 16 elements"});
}

}  // namespace
}  // namespace tierzero::checkpoint
