// activation_checkpointing (DeepSpeed's keys, kept for round-trips) and the `tierzero`
// extension section (table in ds_config.h).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/config/internal/ds_config_sections.h"
#include "engine/config/internal/flag_values.h"

namespace tierzero::engine::detail {

Status parse_activation_checkpointing(JsonFields& root, ActivationCheckpointingConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields f, root.child("activation_checkpointing"));
  TZ_RETURN_IF_ERROR(f.read_bool("partition_activations", &out->partition_activations));
  TZ_RETURN_IF_ERROR(f.read_bool("cpu_checkpointing", &out->cpu_checkpointing));
  TZ_RETURN_IF_ERROR(f.read_bool("contiguous_memory_optimization", &out->contiguous_memory_optimization));
  TZ_RETURN_IF_ERROR(f.read_int("number_checkpoints", &out->number_checkpoints, 0));
  TZ_RETURN_IF_ERROR(f.read_bool("synchronize_checkpoint_boundary", &out->synchronize_checkpoint_boundary));
  TZ_RETURN_IF_ERROR(f.read_bool("profile", &out->profile));
  TZ_RETURN_IF_ERROR(f.check_unused(warnings));
  return {};
}

namespace {

Status parse_checkpoint(JsonFields& t, TierzeroConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields c, t.child("checkpoint"));
  std::string compression = "none";
  TZ_RETURN_IF_ERROR(c.read_string("compression", &compression));
  if (compression == "none") {
    out->checkpoint_compression = CheckpointCompression::kNone;
  } else if (compression == "zstd") {
    out->checkpoint_compression = CheckpointCompression::kZstd;
  } else {
    return invalid_argument(c.path_of("compression") + " must be \"none\" or \"zstd\", got \"" + compression + "\"");
  }
  TZ_RETURN_IF_ERROR(c.read_int("level", &out->checkpoint_compression_level, 1, 22));
  TZ_RETURN_IF_ERROR(c.read_int("save_every", &out->checkpoint_save_every, 0));
  TZ_RETURN_IF_ERROR(c.read_int("keep_last", &out->checkpoint_keep_last, 0));
  uint64_t write_behind = 0;
  if (c.is_auto("write_behind")) {
    out->checkpoint_write_behind = kWriteBehindAuto;
  } else if (Status read = c.read_bytes("write_behind", &write_behind); !read.ok()) {
    return invalid_argument(c.path_of("write_behind") +
                            " must be a byte size (e.g. 4GiB; 0: the state is read at the disk's rate) or \"auto\", "
                            "got " + c.raw("write_behind").dump());
  } else if (c.has("write_behind")) {
    out->checkpoint_write_behind = static_cast<int64_t>(write_behind);
  }
  TZ_RETURN_IF_ERROR(c.check_unused(warnings));
  return {};
}

// seq_len: "auto" takes --seq-len; the flag, when given, overrides a value (as --data overrides path).
Status parse_data(JsonFields& t, const TrainerFlags& flags, TierzeroConfig* out, Warnings* warnings) {
  constexpr int64_t kMaxSeqLen = int64_t{1} << 24;
  TZ_ASSIGN_OR_RETURN(JsonFields d, t.child("data"));
  TZ_RETURN_IF_ERROR(d.read_string("path", &out->data_path));
  if (flags.seq_len) {
    if (*flags.seq_len < 1 || *flags.seq_len > kMaxSeqLen)
      return invalid_argument("--seq-len must be between 1 and " + std::to_string(kMaxSeqLen) + ", got " +
                              std::to_string(*flags.seq_len));
    d.has("seq_len");  // the flag's value stands for it
    out->data_seq_len = *flags.seq_len;
  } else if (d.is_auto("seq_len")) {
    return auto_needs_flag(d, "seq_len", "--seq-len");
  } else {
    TZ_RETURN_IF_ERROR(d.read_int("seq_len", &out->data_seq_len, 1, kMaxSeqLen));
  }
  int64_t seed = static_cast<int64_t>(out->data_seed);
  TZ_RETURN_IF_ERROR(d.read_int("seed", &seed, 0));
  out->data_seed = static_cast<uint64_t>(seed);
  TZ_RETURN_IF_ERROR(d.read_string("dtype", &out->data_dtype));
  if (!out->data_dtype.empty() && out->data_dtype != "uint16" && out->data_dtype != "uint32") {
    return invalid_argument(d.path_of("dtype") + " must be \"uint16\" or \"uint32\", got \"" + out->data_dtype + "\"");
  }
  TZ_RETURN_IF_ERROR(d.check_unused(warnings));
  return {};
}

}  // namespace

Result<IgnoredKeys> read_ignored_keys(const nlohmann::json& root) {
  constexpr const char* kKey = "tierzero.ignore_unknown_keys";
  IgnoredKeys ignored;
  if (!root.is_object() || !root.contains("tierzero") || !root["tierzero"].is_object()) return ignored;
  const nlohmann::json& tierzero = root["tierzero"];
  if (!tierzero.contains("ignore_unknown_keys") || tierzero["ignore_unknown_keys"].is_null()) return ignored;
  const nlohmann::json& list = tierzero["ignore_unknown_keys"];
  if (!list.is_array())
    return invalid_argument(std::string(kKey) + " must be a list of key paths, e.g. [\"my_tool\"], got " + list.dump());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string entry = std::string(kKey) + "[" + std::to_string(i) + "]";
    if (!list[i].is_string() || list[i].get<std::string>().empty())
      return invalid_argument(entry + " must be a key path (a non-empty string such as \"zero_optimization.my_key\"), "
                              "got " + list[i].dump());
    const std::string path = list[i].get<std::string>();
    // A path tierzero knows, or a section of them, would pass over a typo inside it.
    const size_t dot = path.rfind('.');
    const std::vector<std::string> siblings =
        registered_children(dot == std::string::npos ? std::string_view() : std::string_view(path).substr(0, dot));
    const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
    if (std::find(siblings.begin(), siblings.end(), name) != siblings.end())
      return invalid_argument(entry + " \"" + path +
                              "\" is a key tierzero knows: only keys of other tools may be passed over; remove it");
    ignored.insert(path);
  }
  return ignored;
}

Status parse_tierzero(JsonFields& root, const TrainerFlags& flags, TierzeroConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields t, root.child("tierzero"));
  t.has("ignore_unknown_keys");  // read by read_ignored_keys()
  TZ_RETURN_IF_ERROR(t.read_bytes("gpu_memory_limit", &out->gpu_memory_limit));
  TZ_RETURN_IF_ERROR(t.read_bytes("pinned_memory_limit", &out->pinned_memory_limit));
  TZ_RETURN_IF_ERROR(t.read_int("cpu_threads", &out->cpu_threads, 0, 4096));
  std::string dtype = "fp32";
  TZ_RETURN_IF_ERROR(t.read_string("grad_accum_dtype", &dtype));
  if (dtype == "fp32") {
    out->grad_accum_dtype = GradAccumDtype::kFp32;
  } else if (dtype == "bf16") {
    out->grad_accum_dtype = GradAccumDtype::kBf16;
  } else {
    return invalid_argument(t.path_of("grad_accum_dtype") + " must be \"fp32\" or \"bf16\", got \"" + dtype + "\"");
  }
  std::string state = "fp32";
  TZ_RETURN_IF_ERROR(t.read_string("optimizer_state_dtype", &state));
  if (state == "fp32") {
    out->optimizer_state_dtype = OptimizerStateDtype::kFp32;
  } else if (state == "bf16") {
    out->optimizer_state_dtype = OptimizerStateDtype::kBf16;
  } else if (state == "int8") {
    out->optimizer_state_dtype = OptimizerStateDtype::kInt8;
  } else {
    return invalid_argument(t.path_of("optimizer_state_dtype") + " must be \"fp32\", \"bf16\" or \"int8\", got \"" +
                            state + "\"");
  }
  std::string master = "fp32";
  TZ_RETURN_IF_ERROR(t.read_string("master_weights", &master));
  if (master == "fp32") {
    out->master_weights = MasterWeights::kFp32;
  } else if (master == "compact") {
    out->master_weights = MasterWeights::kCompact;
  } else {
    return invalid_argument(t.path_of("master_weights") + " must be \"fp32\" or \"compact\", got \"" + master + "\"");
  }
  std::string grads = "fp32";
  TZ_RETURN_IF_ERROR(t.read_string("offload_grad_dtype", &grads));
  if (grads == "fp32") {
    out->offload_grad_dtype = OffloadGradDtype::kFp32;
  } else if (grads == "bf16") {
    out->offload_grad_dtype = OffloadGradDtype::kBf16;
  } else {
    return invalid_argument(t.path_of("offload_grad_dtype") + " must be \"fp32\" or \"bf16\", got \"" + grads + "\"");
  }
  if (t.is_auto("optimizer_records_in_memory")) {
    out->optimizer_records_in_memory = kOptimizerRecordsAuto;
  } else if (Status read = t.read_int("optimizer_records_in_memory", &out->optimizer_records_in_memory, 0); !read.ok()) {
    return invalid_argument(t.path_of("optimizer_records_in_memory") + " must be an integer >= 0 or \"auto\", got " +
                            t.raw("optimizer_records_in_memory").dump());
  }
  TZ_RETURN_IF_ERROR(t.read_int("grad_ring_records", &out->grad_ring_records, 0));
  if (t.is_auto("window_group")) {
    out->window_group = kWindowGroupAuto;
  } else if (Status read = t.read_int("window_group", &out->window_group, 1); !read.ok()) {
    return invalid_argument(t.path_of("window_group") + " must be an integer >= 1 or \"auto\", got " +
                            t.raw("window_group").dump());
  }
  if (t.is_auto("kept_activations")) {
    out->kept_activations = kKeptActivationsAuto;
  } else if (Status read = t.read_int("kept_activations", &out->kept_activations, 0); !read.ok()) {
    return invalid_argument(t.path_of("kept_activations") + " must be an integer >= 0 or \"auto\", got " +
                            t.raw("kept_activations").dump());
  }
  TZ_RETURN_IF_ERROR(t.read_double("gpu_optimizer_share", &out->gpu_optimizer_share, 0.0, 1.0));
  if (out->gpu_optimizer_share >= 1.0)
    return invalid_argument(t.path_of("gpu_optimizer_share") +
                            " must be below 1 (the CPU keeps a share of the step; 0: it steps them all), got 1");
  std::string accumulator = "auto";
  TZ_RETURN_IF_ERROR(t.read_string("offload_grad_accumulator", &accumulator));
  if (accumulator == "auto") {
    out->offload_grad_accumulator = OffloadGradAccumulator::kAuto;
  } else if (accumulator == "device") {
    out->offload_grad_accumulator = OffloadGradAccumulator::kDevice;
  } else if (accumulator == "host") {
    out->offload_grad_accumulator = OffloadGradAccumulator::kHost;
  } else {
    return invalid_argument(t.path_of("offload_grad_accumulator") +
                            " must be \"auto\", \"device\" or \"host\", got \"" + accumulator + "\"");
  }
  TZ_RETURN_IF_ERROR(parse_checkpoint(t, out, warnings));
  TZ_RETURN_IF_ERROR(parse_data(t, flags, out, warnings));
  TZ_RETURN_IF_ERROR(parse_lora(t, &out->lora, warnings));
  TZ_RETURN_IF_ERROR(t.check_unused(warnings));
  return {};
}

Status check_state_layout(const DsConfig& c) {
  const TierzeroConfig& t = c.tierzero;
  const OffloadDevice optimizer = c.zero.offload_optimizer.device;
  const bool offloaded = optimizer != OffloadDevice::kNone;
  if (t.master_weights == MasterWeights::kCompact && (c.precision() != Precision::kBf16 || !offloaded))
    return invalid_argument(
        "tierzero.master_weights \"compact\" keeps the fp32 master as the bf16 compute weights plus a 16-bit "
        "residual: it needs bf16.enabled true and zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" "
        "(this config has " +
        std::string(c.precision() == Precision::kBf16 ? "bf16" : c.precision() == Precision::kFp16 ? "fp16" : "fp32") +
        " and offload_optimizer \"" + offload_device_name(optimizer) +
        "\"); set those, or tierzero.master_weights \"fp32\"");
  if (t.master_weights == MasterWeights::kCompact && c.zero.stage == 3 &&
      c.zero.offload_param.device == OffloadDevice::kNvme)
    return invalid_argument(
        "tierzero.master_weights \"compact\" with zero_optimization.offload_param.device \"nvme\" is not supported "
        "(the master's bf16 half would be read back from the parameter swap every step); use offload_param \"cpu\" "
        "or tierzero.master_weights \"fp32\"");
  if (t.optimizer_state_dtype == OptimizerStateDtype::kInt8 && !offloaded)
    return invalid_argument(
        "tierzero.optimizer_state_dtype \"int8\" (8-bit blockwise moments) is kept by the offloaded optimizer "
        "only: set zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\", or optimizer_state_dtype "
        "\"fp32\"");
  if (t.offload_grad_dtype == OffloadGradDtype::kBf16 && !offloaded)
    return invalid_argument(
        "tierzero.offload_grad_dtype \"bf16\" sets the offloaded optimizer's host gradient partition: set "
        "zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\", or offload_grad_dtype \"fp32\" "
        "(tierzero.grad_accum_dtype sets the GPU's)");
  if (t.grad_ring_records != 0 && !offloaded)
    return invalid_argument(
        "tierzero.grad_ring_records sets where the offloaded optimizer's host gradients land: set "
        "zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\", or grad_ring_records 0");
  if (t.gpu_optimizer_share > 0.0 && (t.master_weights != MasterWeights::kCompact || !offloaded))
    return invalid_argument(
        "tierzero.gpu_optimizer_share steps a share of the offloaded optimizer's compact master on the GPU (bit for "
        "bit the CPU kernel): it needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" and "
        "tierzero.master_weights \"compact\" (this config has offload_optimizer \"" +
        std::string(offload_device_name(optimizer)) + "\" and master_weights \"" +
        master_weights_name(t.master_weights) + "\"); set those, or tierzero.gpu_optimizer_share 0");
  if (t.optimizer_records_in_memory != 0 && optimizer != OffloadDevice::kNvme)
    return invalid_argument(
        "tierzero.optimizer_records_in_memory keeps some of the optimizer's NVMe records in pinned memory: it needs "
        "zero_optimization.offload_optimizer.device \"nvme\" (this config has \"" +
        std::string(offload_device_name(optimizer)) + "\"); remove it, or offload the optimizer to NVMe");
  if (t.optimizer_records_in_memory == kOptimizerRecordsAuto && t.pinned_memory_limit == 0)
    return invalid_argument(
        "tierzero.optimizer_records_in_memory \"auto\" keeps as many records as tierzero.pinned_memory_limit "
        "holds: set tierzero.pinned_memory_limit (e.g. \"100GB\"), or give a record count");
  const int64_t accum = c.batch.gradient_accumulation_steps;
  if (t.window_group > 1 && (c.zero.stage != 3 || accum % t.window_group != 0))
    return invalid_argument(
        "tierzero.window_group " + std::to_string(t.window_group) +
        " runs that many micro-batches of a step's window as one batch: it needs zero_optimization.stage 3 and "
        "must divide gradient_accumulation_steps (this config has stage " +
        std::to_string(c.zero.stage) + " and " + std::to_string(accum) +
        " accumulation steps); choose a divisor, or \"auto\"");
  if (t.kept_activations > 0 && (c.zero.stage != 3 || accum < 2))
    return invalid_argument("tierzero.kept_activations " + std::to_string(t.kept_activations) +
                            " keeps decoder layers' graphs in the window of a step's micro-batches: it needs "
                            "zero_optimization.stage 3 and gradient_accumulation_steps >= 2 (this config has stage " +
                            std::to_string(c.zero.stage) + " and " + std::to_string(accum) +
                            " accumulation steps); set those, or 0 / \"auto\"");
  return {};
}

}  // namespace tierzero::engine::detail
