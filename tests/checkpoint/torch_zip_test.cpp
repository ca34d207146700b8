// ZipArchive and TorchFile on a hand-built zip64 archive (every size and offset moved into zip64
// extra fields, as torch.save does past 4 GiB), with fp32, fp16, bf16 and int64 storages.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/torch_format/torch_file.h"
#include "tests/checkpoint/deepspeed_fixtures.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

// data.pkl of torch.save({'w': f32[4], 'h': f16[5], 'b': bf16[2], 'i': i64[2]}) (storages 0..3).
constexpr const char* kPickleHex =
    "80027d710028580100000077710163746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a7102282858"
    "0700000073746f72616765710363746f7263680a466c6f617453746f726167650a71045801000000307105580300000063707571"
    "064b04747107514b004b048571084b018571098963636f6c6c656374696f6e730a4f726465726564446963740a710a2952710b74"
    "710c52710d580100000068710e68022828680363746f7263680a48616c6653746f726167650a710f580100000031711068064b05"
    "747111514b004b058571124b0185711389680a29527114747115527116580100000062711768022828680363746f7263680a4246"
    "6c6f6174313653746f726167650a7118580100000032711968064b0274711a514b004b0285711b4b0185711c89680a2952711d74"
    "711e52711f580100000069712068022828680363746f7263680a4c6f6e6753746f726167650a7121580100000033712268064b02"
    "747123514b004b028571244b0185712589680a29527126747127527128752e";

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A stored zip whose central directory and end record use zip64 for every size and offset.
std::string zip64_archive(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out, central;
  for (const auto& [name, data] : files) {
    const uint64_t local = out.size();
    put(out, 0x04034b50, 4);
    put(out, 45, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 4), put(out, 0, 4);
    put(out, 0xffffffff, 4), put(out, 0xffffffff, 4);
    put(out, name.size(), 2), put(out, 20, 2);
    out += name;
    put(out, 1, 2), put(out, 16, 2), put(out, data.size(), 8), put(out, data.size(), 8);
    out += data;
    put(central, 0x02014b50, 4);
    put(central, 45, 2), put(central, 45, 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 4);
    put(central, 0, 4), put(central, 0xffffffff, 4), put(central, 0xffffffff, 4);
    put(central, name.size(), 2), put(central, 28, 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 4), put(central, 0xffffffff, 4);
    central += name;
    put(central, 1, 2), put(central, 24, 2), put(central, data.size(), 8), put(central, data.size(), 8),
        put(central, local, 8);
  }
  const uint64_t cd_offset = out.size(), z64_offset = out.size() + central.size();
  out += central;
  put(out, 0x06064b50, 4), put(out, 44, 8), put(out, 45, 2), put(out, 45, 2), put(out, 0, 4), put(out, 0, 4);
  put(out, files.size(), 8), put(out, files.size(), 8), put(out, central.size(), 8), put(out, cd_offset, 8);
  put(out, 0x07064b50, 4), put(out, 0, 4), put(out, z64_offset, 8), put(out, 1, 4);
  put(out, 0x06054b50, 4), put(out, 0, 2), put(out, 0, 2), put(out, 0xffff, 2), put(out, 0xffff, 2);
  put(out, 0xffffffff, 4), put(out, 0xffffffff, 4), put(out, 0, 2);
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

class TorchZip : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<uint16_t> halves = {0x3c00, 0x0001, 0xfc00, 0x7bff, 0x8000};  // 1, 2^-24, -inf, 65504, -0
    const std::vector<uint16_t> bf16 = {0x3f80, 0xc0a0};                            // 1, -5
    const std::vector<int64_t> ints = {-3, 7};
    std::ofstream(path_, std::ios::binary) << zip64_archive({{"archive/data.pkl", from_hex(kPickleHex)},
                                                             {"archive/byteorder", "little"},
                                                             {"archive/data/0", raw(std::vector<float>{1, 2, 3, 4})},
                                                             {"archive/data/1", raw(halves)},
                                                             {"archive/data/2", raw(bf16)},
                                                             {"archive/data/3", raw(ints)}});
  }
  test_support::ScratchDir dir_{"tierzero-ds-test"};
  std::string path_ = dir_.path() + "/t.pt";
};

TEST_F(TorchZip, Zip64EntriesAreFoundAndRead) {
  auto zip = ZipArchive::open(path_);
  ASSERT_OK(zip);
  ASSERT_EQ(zip->entries().size(), 6u);
  const ZipEntry* order = zip->find("archive/byteorder");
  ASSERT_NE(order, nullptr);
  std::string text(6, '\0');
  ASSERT_OK(zip->read(*order, 0, std::as_writable_bytes(std::span(text))));
  EXPECT_EQ(text, "little");
  std::byte one;
  EXPECT_EQ(zip->read(*order, 6, std::span(&one, 1)).code(), ErrorCode::kCorrupt);
}

TEST_F(TorchZip, TensorsOfEveryStorageTypeWidenToFp32) {
  auto file = TorchFile::open(path_);
  ASSERT_OK(file);
  const PyValue& root = file->root();
  auto read_all = [&](const char* key) {
    auto t = file->tensor(*root.get(key), key);
    EXPECT_OK(t);
    std::vector<float> out(t->numel);
    EXPECT_OK(file->read_fp32(*t, 0, out));
    return out;
  };
  EXPECT_EQ(read_all("w"), (std::vector<float>{1, 2, 3, 4}));
  const auto h = read_all("h");
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], std::ldexp(1.0f, -24));
  EXPECT_EQ(h[2], -INFINITY);
  EXPECT_EQ(h[3], 65504.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(h[4]), 0x80000000u);
  EXPECT_EQ(read_all("b"), (std::vector<float>{1, -5}));
  EXPECT_EQ(read_all("i"), (std::vector<float>{-3, 7}));

  auto w = file->tensor(*root.get("w"), "w");
  std::vector<float> tail(2);
  ASSERT_OK(file->read_fp32(*w, 2, tail));
  EXPECT_EQ(tail, (std::vector<float>{3, 4}));
  EXPECT_EQ(file->read_fp32(*w, 3, tail).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(file->tensor(root, "root").status().code(), ErrorCode::kCorrupt);
}

TEST_F(TorchZip, NotAZipIsRefused) {
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << std::string(100, 'x');
  EXPECT_ERROR(ZipArchive::open(path_), ErrorCode::kCorrupt, "truncated zip: no end-of-central-directory record");
  EXPECT_EQ(ZipArchive::open(dir_.path() + "/missing.pt").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace tierzero::checkpoint
