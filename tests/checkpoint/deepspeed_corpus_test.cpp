// The DeepSpeed readers against checkpoints DeepSpeed itself wrote (tests/data/deepspeed, made by
// tests/checkpoint/deepspeed_corpus/make_corpus.py; MANIFEST there lists the cases; or the corpus
// in $TIERZERO_DEEPSPEED_CORPUS). Every case, bit for bit:
//   - convert --dtype fp32 equals DeepSpeed's zero_to_fp32 (names, order, shapes, dtypes, bytes),
//     tied aliases left out and reported as aliases; where zero_to_fp32 keeps a frozen parameter
//     16-bit, ours is its exact fp32 widening; stage 1's frozen parameters, which zero_to_fp32
//     drops, are present;
//   - convert to the training dtype equals DeepSpeed's save_16bit_model (pytorch_model.bin);
//   - the universal checkpoint ds_to_universal.py made of it converts to its fp32.pt tensors, which
//     equal zero_to_fp32's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/safetensors/safetensors.h"
#include "checkpoint/torch_format/torch_file.h"
#include "tests/checkpoint/deepspeed_fixtures.h"
#include "tests/common/float16_reference.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

// $TIERZERO_DEEPSPEED_CORPUS (a corpus make_corpus.py wrote elsewhere, e.g. on the GPU box), else
// the committed one.
std::string corpus_dir() {
  const char* env = std::getenv("TIERZERO_DEEPSPEED_CORPUS");
  return env != nullptr && *env != '\0' ? env : TIERZERO_DEEPSPEED_CORPUS_DIR;
}

std::vector<std::string> corpus_cases() {
  std::vector<std::string> cases;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(corpus_dir(), ec)) {
    if (e.is_directory() && fs::exists(e.path() / "case.json")) cases.push_back(e.path().filename().string());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class DeepSpeedCorpus : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return corpus_dir() + "/" + GetParam(); }
  nlohmann::json info() const { return read_json(dir() + "/case.json"); }

  // Converts `source` to `dtype` into a fresh folder and opens the one safetensors file.
  std::unique_ptr<SafetensorsFile> convert(ConsolidationSource& source, ElementType dtype) {
    ConvertOptions options;
    options.dtype = dtype;
    options.progress = false;
    const std::string out = scratch_.path() + "/" + std::to_string(converted_++);
    auto report = consolidate_to_safetensors(source, out, options);
    EXPECT_OK(report);
    EXPECT_TRUE(fs::exists(out + "/config.json"));
    auto file = SafetensorsFile::open(out + "/model.safetensors");
    EXPECT_OK(file);
    return file.ok() ? std::move(*file) : nullptr;
  }

  test_support::ScratchDir scratch_{"tierzero-ds-test"};
  int converted_ = 0;
};

// The exact fp32 value of fp16 or bf16 bits.
float widen16(ElementType dtype, uint16_t h) {
  return dtype == ElementType::kBF16 ? reference::bf16_bits_to_float(h) : reference::f16_bits_to_float(h);
}

// Expects `ours` to hold tensor `name` with `dtype`, `shape` and exactly `bytes`.
void expect_tensor(const SafetensorsFile& ours, const std::string& name, ElementType dtype,
                   const std::vector<int64_t>& shape, std::span<const std::byte> bytes) {
  const SafetensorsTensorInfo* info = ours.find(name);
  ASSERT_NE(info, nullptr) << name << " missing";
  EXPECT_EQ(info->dtype, dtype) << name;
  EXPECT_EQ(info->shape, shape) << name;
  const auto got = ours.data(*info);
  ASSERT_EQ(got.size(), bytes.size()) << name;
  EXPECT_EQ(0, std::memcmp(got.data(), bytes.data(), bytes.size())) << name << ": bytes differ";
}

TEST_P(DeepSpeedCorpus, Fp32EqualsZeroToFp32) {
  auto source = open_deepspeed_checkpoint(dir(), "");
  ASSERT_OK(source);
  auto ref = SafetensorsFile::open(dir() + "/zero_to_fp32.safetensors");
  ASSERT_OK(ref);
  const auto& metadata = (*ref)->header().metadata;
  const auto ref_aliases = nlohmann::json::parse(metadata.at("aliases")).get<std::vector<std::vector<std::string>>>();
  const auto ref_order = nlohmann::json::parse(metadata.at("order")).get<std::vector<std::string>>();

  std::set<std::pair<std::string, std::string>> want_aliases, got_aliases;
  for (const auto& a : ref_aliases) want_aliases.emplace(a[0], a[1]);
  for (const auto& a : (*source)->aliases()) got_aliases.insert(a);
  EXPECT_EQ(got_aliases, want_aliases);
  std::vector<std::string> want_order, got_order;
  for (const std::string& name : ref_order) {
    if (!std::any_of(ref_aliases.begin(), ref_aliases.end(), [&](const auto& a) { return a[0] == name; })) {
      want_order.push_back(name);
    }
  }
  // Stage 1 files record no frozen_param_shapes, so zero_to_fp32 drops the frozen parameters;
  // tierzero recovers them from `module` (checked against save_16bit_model below).
  const nlohmann::json c = info();
  const bool recovers_frozen = c["zero_stage"] == 1;
  std::set<std::string> extra;
  for (const TensorSpec& spec : (*source)->tensors()) {
    if (std::find(want_order.begin(), want_order.end(), spec.name) == want_order.end()) {
      extra.insert(spec.name);
    } else {
      got_order.push_back(spec.name);
    }
  }
  EXPECT_EQ(got_order, want_order) << "zero_to_fp32's order: buffers, frozen, trainable";
  EXPECT_EQ(extra, recovers_frozen ? c["frozen"].get<std::set<std::string>>() : std::set<std::string>{});

  const auto ours = convert(**source, ElementType::kF32);
  ASSERT_NE(ours, nullptr);
  EXPECT_EQ(ours->header().tensors.size(), (*ref)->header().tensors.size() + extra.size());
  for (const SafetensorsTensorInfo& t : (*ref)->header().tensors) {
    if (t.dtype != ElementType::kF16 && t.dtype != ElementType::kBF16) {
      expect_tensor(*ours, t.name, t.dtype, t.shape, (*ref)->data(t));
      continue;
    }
    // zero_to_fp32 leaves frozen parameters in the training dtype; --dtype fp32 widens them (exact).
    const auto bits = (*ref)->data(t);
    std::vector<float> widened(bits.size() / 2);
    for (size_t i = 0; i < widened.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bits.data() + 2 * i, 2);
      widened[i] = widen16(t.dtype, h);
    }
    expect_tensor(*ours, t.name, ElementType::kF32, t.shape, std::as_bytes(std::span(widened)));
  }
}

TEST_P(DeepSpeedCorpus, TrainingDtypeEqualsSave16bitModel) {
  const std::string bin = dir() + "/pytorch_model.bin";
  if (!fs::exists(bin))
    GTEST_SKIP() << "DeepSpeed wrote no save_16bit_model output for this case (ZeRO-3 without "
                    "stage3_gather_16bit_weights_on_model_save)";
  const std::string dtype_name = info()["dtype"];
  const ElementType dtype = *parse_element_type(dtype_name);
  auto source = open_deepspeed_checkpoint(dir(), "");
  ASSERT_OK(source);
  const auto ours = convert(**source, dtype);
  ASSERT_NE(ours, nullptr);
  auto model = TorchFile::open(bin);
  ASSERT_OK(model);
  std::map<std::string, std::string> alias_of((*source)->aliases().begin(), (*source)->aliases().end());
  size_t compared = 0;
  for (const auto& [key, value] : model->root().entries) {
    ASSERT_EQ(key->kind, PyKind::kString);
    if (const auto a = alias_of.find(key->text); a != alias_of.end()) {
      EXPECT_NE(ours->find(a->second), nullptr) << key->text << " is tied to " << a->second;
      continue;
    }
    auto t = model->tensor(*value, key->text);
    ASSERT_OK(t);
    std::vector<std::byte> want(*element_bytes(t->dtype, t->numel));
    ASSERT_OK(model->read_bytes(*t, want));
    expect_tensor(*ours, key->text, t->dtype, t->shape, want);
    ++compared;
  }
  EXPECT_EQ(compared, ours->header().tensors.size());
}

// The cases make_corpus.py ran ds_to_universal.py on.
std::vector<std::string> universal_cases() {
  std::vector<std::string> cases;
  for (const std::string& c : corpus_cases()) {
    if (fs::exists(corpus_dir() + "/" + c + "/universal")) cases.push_back(c);
  }
  return cases;
}

class DeepSpeedUniversalCorpus : public DeepSpeedCorpus {};

TEST_P(DeepSpeedUniversalCorpus, EqualsItsFp32FilesAndZeroToFp32) {
  const std::string universal = dir() + "/universal";
  ASSERT_TRUE(is_deepspeed_universal_checkpoint(universal));
  auto source = open_deepspeed_universal_checkpoint(universal, "");
  ASSERT_OK(source);
  const auto ours = convert(**source, ElementType::kF32);
  ASSERT_NE(ours, nullptr);
  auto ref = SafetensorsFile::open(dir() + "/zero_to_fp32.safetensors");
  ASSERT_OK(ref);
  std::string tag;
  std::ifstream(universal + "/latest_universal") >> tag;
  size_t matched_ref = 0;
  for (const auto& e : fs::directory_iterator(universal + "/" + tag + "/zero")) {
    if (!e.is_directory()) continue;
    const std::string name = e.path().filename().string();
    auto file = TorchFile::open(e.path().string() + "/fp32.pt");
    ASSERT_OK(file);
    const PyValue* param = file->root().kind == PyKind::kDict ? file->root().get("param") : &file->root();
    ASSERT_NE(param, nullptr) << name;
    auto t = file->tensor(*param, "param");
    ASSERT_OK(t);
    std::vector<std::byte> want(t->numel * sizeof(float));
    ASSERT_OK(file->read_bytes(*t, want));
    const SafetensorsTensorInfo* r = (*ref)->find(name);
    const std::vector<int64_t> shape = r != nullptr ? r->shape : t->shape;  // stage 3 saves them flat
    expect_tensor(*ours, name, ElementType::kF32, shape, want);
    if (r != nullptr && r->dtype == ElementType::kF32) {  // ds_to_universal widens integer buffers
      expect_tensor(*ours, name, ElementType::kF32, r->shape, (*ref)->data(*r));
      ++matched_ref;
    }
  }
  EXPECT_GT(matched_ref, 0u);
  for (const auto& [alias, target] : (*source)->aliases()) EXPECT_EQ(ours->find(alias), nullptr) << alias;
}

INSTANTIATE_TEST_SUITE_P(Cases, DeepSpeedCorpus, ::testing::ValuesIn(corpus_cases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Cases, DeepSpeedUniversalCorpus, ::testing::ValuesIn(universal_cases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// Every torch.save file DeepSpeed and torch wrote in the corpus parses inertly: model and optimizer
// states, save_16bit_model's output, and every file of the universal checkpoints (Adam's state,
// step counts, optimizer_state.pt with DeepSpeed's loss scaler and enums).
TEST(DeepSpeedCorpusFiles, EveryTorchFileParses) {
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(corpus_dir())) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".pt" && ext != ".bin")) continue;
    auto file = TorchFile::open(e.path().string());
    EXPECT_OK(file);
    ++files;
  }
  EXPECT_GT(files, 100u);
}

TEST(DeepSpeedCorpusPresent, HasBothWorldSizes) {
  const auto cases = corpus_cases();
  EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [](const std::string& c) { return c.starts_with("w1_"); }));
  EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [](const std::string& c) { return c.starts_with("w2_"); }));
}

}  // namespace
}  // namespace tierzero::checkpoint
