// estimate = train, to the byte. For each config (stages 1-3; the optimizer and the parameters on
// none / cpu / nvme; fp32 or compact master; fp32 / bf16 / int8 moments; optimizer records in memory
// 0 / some / by budget; LoRA with the base pinned and on NVMe; 1 and 2 ranks) on three tiny models
// (odd sizes: partitions padded over the ranks, the last optimizer sub-group short), a real engine is
// built on the CPU (its pools in plain host memory, its swap files on disk), and what it allocates —
// its host pool and the LoRA base's, each rank's swap files as they are on disk — equals what
// `tierzero estimate`'s planner (plan_training) plans for one rank. Where the offloaded step
// accumulates micro-batches (tierzero.offload_grad_accumulator "auto" / "device" / "host", one and
// several micro-batches a step) is the engine's choice, and the planner's device accumulator is the
// one the engine allocates, to the byte.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "engine/comm/comm.h"
#include "engine/layout/layout.h"
#include "engine/model/functional_model.h"
#include "engine/plan/plan.h"
#include "engine/train/internal/engine_options.h"
#include "engine/zero/zero_engine.h"
#include "tests/engine/zero/thread_ranks.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

using nlohmann::json;
using testing::run_thread_ranks;

// Three Hugging Face config.json files: tied and untied heads, GQA, Qwen2's biases, sizes that pad.
const char* const kModels[] = {
    R"({"model_type": "llama", "vocab_size": 61, "hidden_size": 32, "intermediate_size": 88,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": true})",
    R"({"model_type": "llama", "vocab_size": 97, "hidden_size": 48, "intermediate_size": 100,
        "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 3,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": false})",
    R"({"model_type": "qwen2", "vocab_size": 50, "hidden_size": 40, "intermediate_size": 72,
        "num_hidden_layers": 1, "num_attention_heads": 5, "num_key_value_heads": 1,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": true})",
};

struct Case {
  std::string name;
  int world = 1;
  json zero;           // zero_optimization ("nvme_path": "OPT"/"OPT2"/"PAR" become scratch directories)
  json tierzero;       // the tierzero block (data.seq_len added)
  bool bf16 = false;   // bf16.enabled (else fp32 compute)
  int64_t accumulation = 1;  // gradient_accumulation_steps
};

json offload(const char* device, json extra = json::object()) {
  extra["device"] = device;
  return extra;
}

const json kNvmeOpt = {{"nvme_path", "OPT"}, {"buffer_count", 3}};
const json kNvmeOpt2 = {{"nvme_path", json::array({"OPT", "OPT2"})}, {"buffer_count", 2}};
const json kNvmePar = {{"nvme_path", "PAR"}, {"buffer_count", 3}, {"buffer_size", 20000}, {"max_in_cpu", 2000}};
const json kLora = {{"r", 4}, {"lora_alpha", 8}, {"target_modules", json::array({"q_proj", "v_proj"})}};

json zero(int stage, json optimizer, json params = json()) {
  json z = {{"stage", stage}, {"sub_group_size", 1024}, {"reduce_bucket_size", 700}, {"offload_optimizer", optimizer}};
  if (!params.is_null()) z["offload_param"] = params;
  return z;
}

// Stage 3 with the overlap the optimizer needs to step inside the backward (the gradient ring).
json ring_zero(json optimizer) {
  json z = zero(3, std::move(optimizer));
  z["overlap_comm"] = true;
  return z;
}

std::vector<Case> cases() {
  const json none = offload("none"), cpu = offload("cpu"), nvme = offload("nvme", kNvmeOpt);
  const json compact_int8 = {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}};
  const json bf16_state = {{"optimizer_state_dtype", "bf16"}, {"offload_grad_dtype", "bf16"}};
  std::vector<Case> out = {
      {"Stage1OnTheGpu", 1, zero(1, none), json::object()},
      {"Stage1Cpu", 1, zero(1, cpu), json::object()},
      {"Stage1CpuCompactInt8", 1, zero(1, cpu), compact_int8, true},
      {"Stage2CpuBf16State", 1, zero(2, cpu), bf16_state},
      {"Stage2NvmeNoneInMemory", 1, zero(2, nvme), json::object()},
      {"Stage2NvmeCompactInt8TwoInMemory", 1, zero(2, nvme), {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}, {"optimizer_records_in_memory", 2}}, true},
      {"Stage2NvmeBf16ByBudget", 1, zero(2, nvme), {{"optimizer_state_dtype", "bf16"}, {"optimizer_records_in_memory", "auto"}, {"pinned_memory_limit", "400KB"}}},
      {"Stage2NvmeAllInMemory", 1, zero(2, nvme), {{"optimizer_records_in_memory", 99}}},
      {"Stage3Cpu", 1, zero(3, cpu), json::object()},
      {"Stage3CpuParamsPinned", 1, zero(3, cpu, offload("cpu", {{"pin_memory", true}})), json::object(), true},
      {"Stage3CpuParamsPageable", 1, zero(3, cpu, offload("cpu")), json::object()},
      {"Stage3NvmeInt8ParamsPinned", 1, zero(3, nvme, offload("cpu", {{"pin_memory", true}})), {{"optimizer_state_dtype", "int8"}}},
      {"Stage3NvmeParamsNvmeOneInMemory", 1, zero(3, nvme, offload("nvme", kNvmePar)), {{"optimizer_records_in_memory", 1}}},
      {"Stage3CpuParamsNvme", 1, zero(3, cpu, offload("nvme", kNvmePar)), json::object(), true},
      {"Stage3NvmeTwoPathsBf16ParamsNvme", 1, zero(3, offload("nvme", kNvmeOpt2), offload("nvme", kNvmePar)), bf16_state},
      {"Stage3CompactInt8ByBudget", 1, zero(3, nvme), {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}, {"optimizer_records_in_memory", "auto"}, {"pinned_memory_limit", "600KB"}}, true},
      {"Stage3CompactCpu", 1, zero(3, cpu), compact_int8, true},
      {"LoraBasePinned", 1, zero(3, cpu, offload("cpu", {{"pin_memory", true}})), {{"lora", kLora}}},
      {"LoraBaseOnNvme", 1, zero(3, cpu, offload("nvme", kNvmePar)), {{"lora", kLora}}},
      {"LoraBasePinnedOptimizerNvmeByBudget", 1, zero(3, nvme, offload("cpu", {{"pin_memory", true}})), {{"lora", kLora}, {"optimizer_records_in_memory", "auto"}, {"pinned_memory_limit", "1MB"}}},
      {"LoraBaseOnNvmeInt8", 1, zero(3, cpu, offload("nvme", kNvmePar)), {{"lora", kLora}, {"optimizer_state_dtype", "int8"}}, true},
      // The gradient ring instead of the partition (the optimizer inside the window's backward: one rank,
      // stage 3, no clipping, accumulation 2): records in memory by budget take the room it frees.
      {"Stage3GradRingCpu", 1, ring_zero(cpu), {{"grad_ring_records", 40}}},
      {"Stage3GradRingNvmeByBudget", 1, ring_zero(nvme), {{"grad_ring_records", 40}, {"offload_grad_dtype", "bf16"}, {"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}, {"optimizer_records_in_memory", "auto"}, {"pinned_memory_limit", "600KB"}}, true},
      {"TwoRanksStage1Cpu", 2, zero(1, cpu), json::object()},
      {"TwoRanksStage2NvmeTwoInMemory", 2, zero(2, nvme), {{"optimizer_records_in_memory", 2}}},
      {"TwoRanksStage2CpuBf16State", 2, zero(2, cpu), bf16_state},
      {"TwoRanksStage3NvmeParamsNvme", 2, zero(3, nvme, offload("nvme", kNvmePar)), json::object()},
      {"TwoRanksStage3CpuParamsPinned", 2, zero(3, cpu, offload("cpu", {{"pin_memory", true}})), compact_int8, true},
      {"TwoRanksStage3NvmeCompactInt8ByBudget", 2, zero(3, nvme), {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}, {"optimizer_records_in_memory", "auto"}, {"pinned_memory_limit", "300KB"}}, true},
      {"TwoRanksStage3Fp32OnTheGpu", 2, zero(3, none), json::object()},
      {"TwoRanksLoraBasePinned", 2, zero(3, cpu, offload("cpu", {{"pin_memory", true}})), {{"lora", kLora}}},
      {"TwoRanksLoraBaseOnNvme", 2, zero(3, nvme, offload("nvme", kNvmePar)), {{"lora", kLora}}},
      {"TwoRanksStage3TwoPathsParamsPageable", 2, zero(3, offload("nvme", kNvmeOpt2), offload("cpu")), bf16_state},
      // The gradient accumulator: "device" is honoured as asked (one micro-batch, no GPU), "auto" without a GPU
      // and "host" land on the host.
      {"DeviceAccumulatorOneMicroBatch", 1, zero(3, cpu), {{"offload_grad_accumulator", "device"}}, false, 1},
      {"DeviceAccumulatorFourMicroBatchesNvme", 1, zero(3, nvme), {{"offload_grad_accumulator", "device"}}, true, 4},
      {"AutoAccumulatorFourMicroBatches", 1, zero(2, cpu), json::object(), false, 4},
      {"TwoRanksHostAccumulatorTwoMicroBatches", 2, zero(1, cpu), {{"offload_grad_accumulator", "host"}}, false, 2},
      {"TwoRanksDeviceAccumulatorTwoMicroBatches", 2, zero(2, cpu), {{"offload_grad_accumulator", "device"}}, true, 2},
  };
  return out;
}

// `value` with every "OPT" / "OPT2" / "PAR" string replaced by that directory under `dir`.
json with_dirs(json value, const std::string& dir) {
  if (value.is_string()) {
    const std::string s = value;
    if (s == "OPT" || s == "OPT2" || s == "PAR") return dir + "/" + s;
  } else if (value.is_structured()) {
    for (auto& item : value) item = with_dirs(item, dir);
  }
  return value;
}

// Bytes of `path`'s extents on disk (FIEMAP: the blocks allocated to its data, written or only
// preallocated, without the file system's own metadata), or its blocks where FIEMAP is not supported.
uint64_t allocated_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return 0;
  struct fiemap probe {};
  probe.fm_length = FIEMAP_MAX_OFFSET;
  probe.fm_flags = FIEMAP_FLAG_SYNC;
  uint64_t bytes = 0;
  if (::ioctl(fd, FS_IOC_FIEMAP, &probe) == 0) {
    std::vector<std::byte> buffer(sizeof(fiemap) + probe.fm_mapped_extents * sizeof(fiemap_extent));
    auto* map = new (buffer.data()) fiemap{};
    map->fm_length = FIEMAP_MAX_OFFSET;
    map->fm_flags = FIEMAP_FLAG_SYNC;
    map->fm_extent_count = probe.fm_mapped_extents;
    EXPECT_EQ(::ioctl(fd, FS_IOC_FIEMAP, map), 0) << path;
    for (uint32_t e = 0; e < map->fm_mapped_extents; ++e) bytes += map->fm_extents[e].fe_length;
  } else {
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0) << path;
    bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  }
  ::close(fd);
  return bytes;
}

// Bytes rank `rank`'s swap files under `dir` (tierzero-<role>-r<rank>.swap) take on disk (preallocated
// with the file size kept: a file's size is only where its last write ended).
uint64_t swap_file_bytes(const std::string& dir, int rank) {
  uint64_t bytes = 0;
  const std::string suffix = "-r" + std::to_string(rank) + ".swap";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      bytes += allocated_bytes(entry.path().string());
  }
  return bytes;
}

// What one rank's engine allocated.
struct Allocated {
  uint64_t pool = 0;         // the engine's host pool
  uint64_t pool_used = 0;    // of it, the bytes its buffers take
  uint64_t frozen_pool = 0;  // the LoRA base's pool (its weights pinned, or its NVMe staging)
  uint64_t swap_files = 0;   // this rank's swap files on disk
  uint64_t accumulator = 0;  // the device gradient accumulator: the partition in fp32, or 0 (host)
};

// The LoRA base's placement as `tierzero train` makes it (session_lora.cpp).
FrozenPlacement frozen_placement(const DsConfig& config, int rank) {
  const OffloadParamConfig& offload = config.zero.offload_param;
  if (offload.device == OffloadDevice::kNone) return FrozenHome::kDevice;
  FrozenPlacement placement(offload.device == OffloadDevice::kNvme ? FrozenHome::kNvme
                            : offload.pin_memory                  ? FrozenHome::kPinnedHost
                                                                  : FrozenHome::kPageableHost);
  placement.nvme_paths = offload.nvme_paths;
  placement.io = config.aio;
  placement.rank = rank;
  placement.pinned_limit_bytes = config.tierzero.pinned_memory_limit;
  return placement;
}

// Builds `comm`'s rank's engine for `config` on `model_json` as `tierzero train` does and reads what it
// holds, its swap files under `dir` included (removed with the engine).
Allocated build_engine(const DsConfig& config, const std::string& model_json, Comm& comm, const std::string& dir) {
  const ModelConfig model_config = value_or_throw(parse_model_config(model_json, "test model"));
  ZeroEngineOptions options = value_or_throw(trainer::engine_options(config));
  std::unique_ptr<FunctionalModel> model = make_causal_lm(model_config);
  std::map<std::string, at::Tensor> params;
  int64_t frozen_pool = 0;
  if (config.tierzero.lora) {
    const LoraConfig& c = *config.tierzero.lora;
    const std::unique_ptr<ParamSource> base = random_init_params(model_config, 7);
    std::unique_ptr<LoraModel> lora = value_or_throw(LoraModel::create(
        std::move(model), LoraSpec{.r = c.r, .lora_alpha = c.lora_alpha, .target_modules = c.target_modules},
        *base, options.partition.compute_dtype, comm.device(), frozen_placement(config, comm.rank())));
    frozen_pool = lora->frozen_pool_bytes();
    options.pinned_memory_limit_bytes = state_layout::pool_limit_after(options.pinned_memory_limit_bytes,
                                                                        static_cast<uint64_t>(frozen_pool));
    params = init_lora_adapters(*lora, 7);
    model = std::move(lora);
  } else {
    params = init_parameters(model_config, 7, at::kFloat, at::kCPU);
  }
  ZeroEngine engine(*model, params, options, comm);
  const int64_t partition = engine.partitioner().partition_numel();
  return {.pool = static_cast<uint64_t>(engine.host_pool_bytes()),
          .pool_used = static_cast<uint64_t>(engine.host_pool_used_bytes()),
          .frozen_pool = static_cast<uint64_t>(frozen_pool),
          .swap_files = swap_file_bytes(dir, comm.rank()),
          .accumulator = engine.grad_accumulation_on_device() ? 4 * static_cast<uint64_t>(partition) : 0};
}

class EstimateEqualsTrain : public ::testing::TestWithParam<Case> {};

TEST_P(EstimateEqualsTrain, PinnedAndNvmeBytesToTheByte) {
  const Case& c = GetParam();
  for (const char* model_json : kModels) {
    test_support::ScratchDir dir;
    const bool ring = c.tierzero.contains("grad_ring_records");  // its step needs a window, and no clipping
    json ds = {{"train_micro_batch_size_per_gpu", 1},
               {"gradient_accumulation_steps", ring ? std::max<int64_t>(2, c.accumulation) : c.accumulation},
               {"gradient_clipping", ring ? 0.0 : 1.0},
               {"bf16", {{"enabled", c.bf16}}},
               {"zero_optimization", with_dirs(c.zero, dir.path())},
               {"tierzero", with_dirs(c.tierzero, dir.path())}};
    ds["tierzero"]["data"] = {{"seq_len", 8}};
    ResolveHints hints;
    hints.world_size = c.world;
    const DsConfig config = value_or_throw(parse_ds_config_text(ds.dump(), hints));
    const ModelDims dims = value_or_throw(parse_model_dims(model_json, "test model"));
    const Plan plan = value_or_throw(plan_training(dims, config, Machine{}, {.seq_len = 8, .compute_on_cpu = true}));
    uint64_t planned_pinned = 0, planned_nvme = 0, planned_accumulator = 0;
    for (const MemoryItem& item : plan.items) {
      if (item.tier == Tier::kPinned) planned_pinned += item.bytes;
      if (item.tier == Tier::kNvme) planned_nvme += item.bytes;
      if (item.what == "gradient accumulator (fp32, the partition)") planned_accumulator += item.bytes;
    }

    std::vector<Allocated> allocated(static_cast<size_t>(c.world));
    if (c.world == 1) {
      const std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCPU));
      allocated[0] = build_engine(config, model_json, *comm, dir.path());
    } else {
      run_thread_ranks(c.world, [&](Comm& comm) {
        allocated[static_cast<size_t>(comm.rank())] = build_engine(config, model_json, comm, dir.path());
      });
    }
    for (int r = 0; r < c.world; ++r) {
      const Allocated& a = allocated[static_cast<size_t>(r)];
      EXPECT_EQ(a.pool + a.frozen_pool, planned_pinned) << "rank " << r << " of " << model_json;
      // The pool's buffers take what their footprints say: less than a page is left over.
      EXPECT_LE(a.pool_used, a.pool);
      EXPECT_LT(a.pool - a.pool_used, 4096u);
      EXPECT_EQ(a.swap_files, planned_nvme) << "rank " << r << " of " << model_json;
      EXPECT_EQ(a.accumulator, planned_accumulator) << "rank " << r << " of " << model_json;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, EstimateEqualsTrain, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace tierzero::engine
