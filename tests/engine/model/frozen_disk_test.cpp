// FrozenWeights homed on NVMe (frozen_disk.h): every unit served in the orders a LoRA run asks for
// them (runs of one unit, ascending forwards, descending backwards, jumps) equals the same unit of
// the weights kept in host memory, bit for bit, also when a unit spans several records (the files
// then hold each unit rounded up to whole records); the swap file lives as long as the weights; a
// nvme_path that is not a directory is refused naming it. On the CPU (the staging copies are the
// same code on a GPU).
#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/model/internal/frozen_disk.h"
#include "engine/model/internal/frozen_weights.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

FrozenPlacement on_nvme(const std::string& dir) {
  FrozenPlacement placement(FrozenHome::kNvme);
  placement.nvme_paths = {dir};
  placement.io.use_direct = false;  // the scratch directory may be a tmpfs
  return placement;
}

TEST(FrozenDisk, ServesEachUnitAsTheHostCopyInEveryOrder) {
  const ModelConfig config = tiny_llama_config();
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  test_support::ScratchDir dir("tierzero-frozen");
  const std::string swap = dir.file("tierzero-frozen-r0.swap");
  {
    std::unique_ptr<ParamSource> source = random_init_params(config, 3);
    Result<std::unique_ptr<FrozenWeights>> host =
        FrozenWeights::load(*model, *source, at::kBFloat16, at::kCPU, FrozenHome::kPageableHost);
    ASSERT_OK(host);
    Result<std::unique_ptr<FrozenWeights>> disk =
        FrozenWeights::load(*model, *source, at::kBFloat16, at::kCPU, on_nvme(dir.path()));
    ASSERT_OK(disk);
    EXPECT_EQ((*disk)->home(), FrozenHome::kNvme);
    EXPECT_TRUE(std::filesystem::exists(swap));
    EXPECT_NE((*disk)->where().find(swap), std::string::npos) << (*disk)->where();
    // Both hold every weight once in bf16 (no tied weight in this model).
    EXPECT_EQ((*disk)->bytes(), (*host)->bytes());

    const size_t last = model->num_units() - 1;
    std::vector<size_t> order;
    for (size_t u = 0; u <= last; ++u) order.insert(order.end(), {u, u});  // the forwards, each asked twice
    for (size_t u = last + 1; u-- > 0;) order.push_back(u);                // the backwards
    order.insert(order.end(), {0, 2, 1, last, 0, 0, 3, last, 1});          // jumps, turns at either end
    for (size_t u : order) {
      const std::vector<at::Tensor> got = (*disk)->unit(u, at::kCPU);
      const std::vector<at::Tensor> want = (*host)->unit(u, at::kCPU);
      ASSERT_EQ(got.size(), want.size()) << "unit " << u;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].scalar_type(), at::kBFloat16);
        EXPECT_TRUE(at::equal(got[i], want[i])) << "unit " << u << " parameter " << model->unit_params(u)[i].name;
      }
    }
  }
  EXPECT_FALSE(std::filesystem::exists(swap)) << "the swap file goes with the weights";
}

TEST(FrozenDisk, AUnitSpansConsecutiveRecordsAndTheFilesHoldOnlyTheUnits) {
  const ModelConfig config = tiny_llama_config();
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::unique_ptr<ParamSource> source = random_init_params(config, 5);
  Result<std::unique_ptr<FrozenWeights>> host =
      FrozenWeights::load(*model, *source, at::kBFloat16, at::kCPU, FrozenHome::kPageableHost);
  ASSERT_OK(host);
  std::vector<std::vector<ParamSpec>> units(model->num_units());
  uint64_t expected_file = 0;  // each unit's 64-byte-aligned parameters, rounded up to whole 8 KiB records
  for (size_t u = 0; u < units.size(); ++u) {
    units[u] = model->unit_params(u);
    uint64_t used = 0;
    for (const ParamSpec& spec : units[u]) used = (used + 2 * c10::multiply_integers(spec.shape) + 63) / 64 * 64;
    expected_file += (used + 8191) / 8192 * 8192;
  }
  test_support::ScratchDir dir("tierzero-frozen");
  const std::vector<at::Tensor> first = (*host)->unit(0, at::kCPU);
  Result<std::unique_ptr<FrozenDisk>> disk = FrozenDisk::create(
      units, at::kBFloat16, on_nvme(dir.path()),
      [&](const ParamSpec& spec, at::Tensor& out) {
        std::vector<float> values(static_cast<size_t>(out.numel()));
        TZ_RETURN_IF_ERROR(source->read(spec.name, 0, values));
        out.copy_(at::from_blob(values.data(), out.sizes(), at::kFloat));
        return Status();
      },
      /*max_record_bytes=*/8192);
  ASSERT_OK(disk);
  EXPECT_EQ((*disk)->file_bytes(), expected_file) << "not every unit in a record of the largest unit's size";
  for (size_t u : {size_t{0}, size_t{1}, size_t{2}, units.size() - 1, size_t{1}, size_t{0}}) {
    const std::vector<at::Tensor> got = (*disk)->unit(u, at::kCPU);
    const std::vector<at::Tensor> want = (*host)->unit(u, at::kCPU);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i], want[i])) << "unit " << u << " parameter " << i;
  }
}

TEST(FrozenDisk, RefusesAPathThatIsNotADirectoryNamingIt) {
  const ModelConfig config = tiny_llama_config();
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  test_support::ScratchDir dir("tierzero-frozen");
  const std::string file = dir.file("not_a_dir");
  std::ofstream(file) << "x";
  std::unique_ptr<ParamSource> source = random_init_params(config, 3);
  Result<std::unique_ptr<FrozenWeights>> disk =
      FrozenWeights::load(*model, *source, at::kBFloat16, at::kCPU, on_nvme(file));
  EXPECT_ERROR(disk, ErrorCode::kIo, "cannot create " + file + " (zero_optimization.offload_param.nvme_path)");
}

}  // namespace
}  // namespace tierzero::engine
