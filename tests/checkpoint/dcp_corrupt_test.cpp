// One damaged copy of a real DCP checkpoint (written by torch, one rank) per class of error the DCP
// reader must refuse, each with a message naming the file, the byte and the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/dcp/dcp_source.h"
#include "tests/checkpoint/dcp_fixture.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

class DcpCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::DcpFixture fx = testing::dcp_fixture(1);
    ASSERT_TRUE(fx.error.empty()) << fx.error;
    if (fx.dir.empty()) GTEST_SKIP() << fx.skip;
    dir_ = scratch_.file("ckpt");
    fs::create_directory(dir_);
    for (const char* name : {".metadata", "__0_0.distcp"}) fs::copy_file(fx.dir + "/" + name, dir_ + "/" + name);
  }

  // Replaces occurrence `nth` (0-based) of `from` in file `name` by `to` (same length).
  void patch(const std::string& name, std::string_view from, std::string_view to, int nth = 0) {
    ASSERT_EQ(from.size(), to.size());
    auto bytes = testing::read_file(dir_ + "/" + name);
    const std::vector<uint8_t> pattern(from.begin(), from.end());
    auto at = bytes.begin();
    for (int i = 0; i <= nth; ++i) {
      if (i > 0) ++at;
      at = std::search(at, bytes.end(), pattern.begin(), pattern.end());
      ASSERT_NE(at, bytes.end()) << "pattern occurrence " << i << " not in " << name;
    }
    std::copy(to.begin(), to.end(), at);
    testing::write_file(dir_ + "/" + name, bytes);
  }

  void truncate(const std::string& name, uint64_t size) { fs::resize_file(dir_ + "/" + name, size); }

  // Opens and converts the damaged copy; expects `code` and every piece of `parts` in the message.
  void expect_refused(ErrorCode code, std::initializer_list<std::string_view> parts) {
    const Status status =
        testing::convert_status(open_dcp_checkpoint(dir_, ""), scratch_.file("out"), ElementType::kF32);
    for (std::string_view part : parts) EXPECT_ERROR(status, code, part);
  }

  testing::ScratchDir scratch_;
  std::string dir_;
};

TEST_F(DcpCorrupt, TruncatedMetadata) {
  truncate(".metadata", 1000);
  expect_refused(ErrorCode::kCorrupt, {".metadata: byte ", "truncated"});
}

TEST_F(DcpCorrupt, MetadataOfAnotherClass) {
  patch(".metadata", "\x8c\x08Metadata", "\x8c\x08Metadatx");
  expect_refused(ErrorCode::kCorrupt, {".metadata: byte 65", "where a Metadata is expected"});
}

TEST_F(DcpCorrupt, MissingChunk) {
  // tok_embeddings.weight is (11, 6); its one chunk shrinks to (10, 6): a row is nobody's.
  patch(".metadata", "K\x0bK\x06\x86", "K\x0aK\x06\x86", 1);
  expect_refused(ErrorCode::kCorrupt, {".metadata: byte ", "cover 60 of its 66 elements", "chunk is missing"});
}

TEST_F(DcpCorrupt, StoragePathOutsideTheFolder) {
  patch(".metadata", "__0_0.distcp", "../x0.distcp");
  expect_refused(ErrorCode::kCorrupt,
                 {".metadata: byte ", "'../x0.distcp'", "not a file inside the checkpoint folder"});
}

TEST_F(DcpCorrupt, UnsupportedDtype) {
  patch(".metadata",
        "\x8c\x07"
        "float32",
        "\x8c\x07"
        "float8x");
  expect_refused(ErrorCode::kUnsupported, {".metadata: byte ", "dtype global torch.float8x"});
}

TEST_F(DcpCorrupt, TruncatedDataFile) {
  truncate("__0_0.distcp", 5000);
  expect_refused(ErrorCode::kCorrupt, {"__0_0.distcp: byte 5000", "the file ends inside the chunk", "truncated"});
}

TEST_F(DcpCorrupt, DamagedChunkBlob) {
  // The last chunk's blob ends the file with its zip's end record: zero that record.
  auto bytes = testing::read_file(dir_ + "/__0_0.distcp");
  std::fill(bytes.end() - 100, bytes.end(), 0);
  testing::write_file(dir_ + "/__0_0.distcp", bytes);
  expect_refused(ErrorCode::kCorrupt, {"__0_0.distcp (bytes [", "no end-of-central-directory record"});
}

TEST_F(DcpCorrupt, ChunkOfAnotherDtype) {
  // .metadata says float64 where the chunks hold float32 (files from different saves).
  patch(".metadata",
        "\x8c\x07"
        "float32",
        "\x8c\x07"
        "float64");
  expect_refused(ErrorCode::kCorrupt, {"__0_0.distcp (bytes [", "fp32 tensor", "(fp64)", "different saves"});
}

}  // namespace
}  // namespace tierzero::checkpoint
