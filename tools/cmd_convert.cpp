// `tierzero convert SRC OUT`: a tierzero, DeepSpeed ZeRO (or universal) or PyTorch DCP checkpoint ->
// Hugging Face safetensors (a LoRA run's: merged over --model, or a PEFT adapter directory with
// --adapter); with --to deepspeed, a tierzero checkpoint -> a DeepSpeed ZeRO checkpoint.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/dcp/dcp_source.h"
#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "common/common.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#ifdef TIERZERO_CONVERT_TO_DEEPSPEED
#include "checkpoint/deepspeed_export/deepspeed_export.h"
#include "engine/config/ds_config.h"
#include "engine/optim/schedules.h"
#endif

namespace tierzero::tools {
namespace {

struct ConvertFlags {
  std::string source;
  std::string out;
  std::string dtype = "bf16";
  std::string max_shard_size = "5GB";
  std::string tag;
  std::string prefix;  // DCP: keep the tensors named PREFIX..., without it
  std::string backend = "auto";
  std::string block_size;    // empty: ConvertOptions' default
  uint32_t queue_depth = 0;  // 0: ConvertOptions' default
  bool no_progress = false;
  std::string to = "safetensors";  // or "deepspeed"
  uint32_t world_size = 0;         // --to deepspeed: DeepSpeed's data-parallel world size (0: the saved one)
  std::string ds_config;           // --to deepspeed: the run's ds_config
  std::string model_dir;           // HF model directory: config.json (when the checkpoint has none), tokenizer
  std::string model_config;        // HF config.json written to OUT, whatever the checkpoint holds
  bool adapter = false;            // a LoRA checkpoint: write a PEFT adapter directory, not the merged model
  std::vector<CLI::Option*> safetensors_only;  // refused with --to deepspeed (--no-progress: no bar there, fine)
  std::vector<CLI::Option*> deepspeed_only;    // --world-size, --ds-config: refused without --to deepspeed
};

// The names of the flags among `options` given on the command line, e.g. "--dtype, --prefix".
std::string given_names(const std::vector<CLI::Option*>& options) {
  std::string names;
  for (const CLI::Option* option : options)
    if (option->count() > 0) names += (names.empty() ? "" : ", ") + option->get_name();
  return names;
}

// The text of a file named by a flag; errors name the flag, the file and the fix.
std::string read_flag_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) throw Error(not_found(flag + " " + path + " cannot be read or is empty"));
  return text.str();
}

// config.json for OUT: --model-config, else the checkpoint's own (empty here: the converter takes
// it from the source), else --model DIR's. Checked to be a JSON object before any tensor is read.
std::string model_config_for(const ConvertFlags& flags, const checkpoint::ConsolidationSource& source) {
  std::string text;
  std::string origin = "--model-config " + flags.model_config;
  if (!flags.model_config.empty()) {
    text = read_flag_file("--model-config", flags.model_config);
  } else if (source.model_config_json().empty() && !flags.model_dir.empty() &&
             std::ifstream(flags.model_dir + "/config.json").good()) {
    origin = "--model " + flags.model_dir + "/config.json";
    text = read_flag_file("--model", flags.model_dir + "/config.json");
  }
  if (!text.empty() && !checkpoint::with_torch_dtype(text, ElementType::kF32).ok()) {
    throw Error(invalid_argument(origin + " is not a JSON object; pass the model's Hugging Face config.json"));
  }
  return text;
}

// What OUT still lacks for transformers to load it as it is, and how to supply it.
void print_missing_companions(const checkpoint::ConvertReport& report, const std::string& kind) {
  if (!report.wrote_config) {
    std::printf(
        "warning: no config.json: pass --model-config FILE (the model's Hugging Face config.json) or --model DIR. "
        "The %s checkpoint carries no model config and none sits beside it (Hugging Face Trainer saves "
        "config.json beside global_stepN/), so from_pretrained cannot build the model from OUT\n",
        kind.c_str());
  }
  if (report.tokenizer_files.empty()) {
    std::printf(
        "warning: no tokenizer files: pass --model DIR (the model directory the checkpoint was trained from). "
        "Neither it nor the checkpoint directory holds tokenizer.json / tokenizer_config.json / tokenizer.model, "
        "so AutoTokenizer cannot load OUT\n");
  }
}

// Picks the reader by what SRC holds: a tierzero manifest, DeepSpeed's .pt files, a DeepSpeed
// universal checkpoint (latest_universal, zero/), or a PyTorch DCP folder (.metadata, *.distcp).
std::unique_ptr<checkpoint::ConsolidationSource> open_source(const ConvertFlags& flags, std::string& kind) {
  if (checkpoint::is_engine_checkpoint(flags.source, flags.tag)) {
    kind = "tierzero";
    return value_or_throw(checkpoint::open_engine_checkpoint_source(flags.source, flags.tag));
  }
  if (checkpoint::is_dcp_checkpoint(flags.source)) {
    if (!flags.tag.empty())
      throw Error(invalid_argument("--tag " + flags.tag + ": SRC " + flags.source +
                                   " is a PyTorch DCP checkpoint, one step with no tags: leave --tag out"));
    kind = "PyTorch DCP";
    return value_or_throw(checkpoint::open_dcp_checkpoint(flags.source, flags.prefix));
  }
  if (!flags.prefix.empty()) throw Error(invalid_argument("--prefix applies to PyTorch DCP checkpoints only"));
  if (checkpoint::is_deepspeed_checkpoint(flags.source)) {
    kind = "DeepSpeed";
    return value_or_throw(checkpoint::open_deepspeed_checkpoint(flags.source, flags.tag));
  }
  if (checkpoint::is_deepspeed_universal_checkpoint(flags.source)) {
    kind = "DeepSpeed universal";
    return value_or_throw(checkpoint::open_deepspeed_universal_checkpoint(flags.source, flags.tag));
  }
  if (!flags.tag.empty()) {
    kind = "DeepSpeed";
    return value_or_throw(checkpoint::open_deepspeed_checkpoint(flags.source, flags.tag));
  }
  throw Error(not_found("SRC " + flags.source +
                        " is not a tierzero checkpoint (DIR/latest -> TAG/manifest.json), a DeepSpeed one "
                        "(DIR/latest -> TAG/*_model_states.pt), a DeepSpeed universal one (DIR/latest_universal -> "
                        "TAG/zero/) or a PyTorch DCP one (DIR/.metadata + *.distcp); pass the directory that holds "
                        "them, or --tag"));
}

uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

#ifdef TIERZERO_CONVERT_TO_DEEPSPEED
// --to deepspeed: the ds_config gives DeepSpeed's optimizer param_groups (lr: the schedule's value
// at the saved position), precision, clipping and loss-scale knobs.
void run_convert_to_deepspeed(const ConvertFlags& flags) {
  if (!checkpoint::is_engine_checkpoint(flags.source, flags.tag)) {
    throw Error(
        invalid_argument("--to deepspeed converts tierzero engine checkpoints; " + flags.source + " is not one"));
  }
  if (flags.ds_config.empty()) {
    throw Error(
        invalid_argument("--to deepspeed needs --ds-config FILE: the ds_config the DeepSpeed run resumes with "
                         "(optimizer, scheduler, fp16/bf16)"));
  }
  auto reader = value_or_throw(checkpoint::CheckpointReader::open(flags.source, flags.tag));
  const checkpoint::CheckpointManifest& manifest = reader->manifest();
  checkpoint::DeepSpeedExportOptions options;
  options.world_size = flags.world_size > 0 ? flags.world_size : manifest.world_size;
  engine::ResolveHints hints;
  hints.world_size = static_cast<int>(options.world_size);
  const engine::DsConfig config = value_or_throw(engine::load_ds_config(flags.ds_config, hints));
  engine::LrScheduleConfig constant{
      .warmup_min_lr = config.optimizer.lr, .warmup_max_lr = config.optimizer.lr, .warmup_num_steps = 1};
  engine::LrSchedule schedule = value_or_throw(engine::LrSchedule::create(config.scheduler.value_or(constant)));
  if (!manifest.lr_scheduler.is_null()) throw_if_error(schedule.load_state(manifest.lr_scheduler));
  std::ifstream text(flags.ds_config);
  options.ds_config = nlohmann::json::parse(text, nullptr, false);
  options.dtype = config.precision() == engine::Precision::kBf16   ? ElementType::kBF16
                  : config.precision() == engine::Precision::kFp16 ? ElementType::kF16
                                                                   : ElementType::kF32;
  options.lr = schedule.lr();
  options.beta1 = config.optimizer.beta1;
  options.beta2 = config.optimizer.beta2;
  options.eps = config.optimizer.eps;
  options.weight_decay = config.optimizer.weight_decay;
  options.decoupled_weight_decay = config.optimizer.decoupled_weight_decay();
  options.gradient_clipping = config.gradient_clipping;
  options.train_batch_size = config.batch.train_batch_size;
  const engine::LossScalerConfig& scaler = config.fp16.loss_scaler;
  options.scale_window = scaler.scale_window;
  options.min_scale = scaler.min_scale;
  options.delayed_shift = scaler.hysteresis;
  options.consecutive_hysteresis = scaler.consecutive_hysteresis;
  const int stage = manifest.zero_stage;
  reader.reset();
  const checkpoint::DeepSpeedExportReport report =
      value_or_throw(checkpoint::export_deepspeed_checkpoint(flags.source, flags.tag, flags.out, options));
  std::printf("wrote DeepSpeed ZeRO-%d checkpoint %s/%s for %u ranks (%s, lr %.6g): %u files, %s\n", stage,
              flags.out.c_str(), report.tag.c_str(), options.world_size, torch_dtype_name(options.dtype), options.lr,
              report.files, format_bytes(report.bytes).c_str());
}
#endif

// A LoRA run's checkpoint holds the adapters only: merged here over --model, the base they were
// trained on (never written without it: transformers would load a model with random weights).
std::unique_ptr<checkpoint::ConsolidationSource> merged_lora_source(const ConvertFlags& flags,
                                                                    checkpoint::ConsolidationSource& adapters) {
  if (flags.model_dir.empty()) {
    throw Error(invalid_argument(
        flags.source + " is a LoRA run's checkpoint: it holds the " + std::to_string(adapters.tensors().size()) +
        " lora_A / lora_B adapters and not the frozen base. Pass --model DIR, the base model directory the run "
        "trained from, to write the merged model (W + scaling * B A), or --adapter to write a PEFT adapter "
        "directory"));
  }
  return value_or_throw(
      checkpoint::open_merged_lora_source(adapters, flags.source + "/adapter_config.json", flags.model_dir));
}

// --adapter: the LoRA checkpoint's adapters as a PEFT adapter directory.
void write_adapter(const ConvertFlags& flags, checkpoint::ConsolidationSource& adapters) {
  if (!flags.model_config.empty() || flags.dtype != "bf16")
    throw Error(
        invalid_argument("--adapter writes fp32 adapters with the run's adapter_config.json: drop "
                         "--model-config and --dtype"));
  const size_t tensors = value_or_throw(
      checkpoint::write_peft_adapter(adapters, flags.source + "/adapter_config.json", flags.model_dir, flags.out));
  std::printf(
      "wrote a PEFT adapter directory %s: adapter_config.json and %zu fp32 tensors in "
      "adapter_model.safetensors (load it with peft.PeftModel.from_pretrained over the base model)\n",
      flags.out.c_str(), tensors);
}

void run_convert(const ConvertFlags& flags) {
  if (flags.to == "deepspeed") {
    const std::string ignored = given_names(flags.safetensors_only);
    if (!ignored.empty())
      throw Error(invalid_argument("--to deepspeed does not read " + ignored + " (safetensors output only): leave " +
                                   ignored + " out, or convert to safetensors"));
#ifdef TIERZERO_CONVERT_TO_DEEPSPEED
    return run_convert_to_deepspeed(flags);
#else
    throw Error(unsupported("--to deepspeed needs a build with the engine (LibTorch found at configure time)"));
#endif
  }
  if (flags.to != "safetensors")
    throw Error(invalid_argument("--to must be safetensors or deepspeed, not " + flags.to));
  const std::string deepspeed_only = given_names(flags.deepspeed_only);
  if (!deepspeed_only.empty())
    throw Error(invalid_argument("--to safetensors (the default) does not read " + deepspeed_only +
                                 " (--to deepspeed only): add --to deepspeed, or leave " + deepspeed_only + " out"));
  checkpoint::ConvertOptions options;
  options.dtype = value_or_throw(checkpoint::parse_output_dtype(flags.dtype));
  options.max_shard_bytes = value_or_throw(parse_bytes(flags.max_shard_size));
  options.io.backend = value_or_throw(nvme::parse_backend(flags.backend));
  if (!flags.block_size.empty()) options.io.block_size = value_or_throw(parse_bytes(flags.block_size));
  if (flags.queue_depth > 0) options.io.queue_depth = flags.queue_depth;
  options.progress = !flags.no_progress;
  if (!flags.model_dir.empty() && !std::filesystem::is_directory(flags.model_dir)) {
    throw Error(not_found("--model " + flags.model_dir + " is not a directory; pass a Hugging Face model directory"));
  }
  std::string kind;
  const auto stored = open_source(flags, kind);
  std::unique_ptr<checkpoint::ConsolidationSource> merged;  // a LoRA checkpoint's model, over `stored`
  if (checkpoint::is_lora_checkpoint(*stored)) {
    if (flags.adapter) return write_adapter(flags, *stored);
    merged = merged_lora_source(flags, *stored);
    kind += " LoRA (merged over --model)";
  } else if (flags.adapter) {
    throw Error(invalid_argument("--adapter applies to a LoRA run's checkpoint; " + flags.source +
                                 " holds a whole model (its tensors are not lora_A / lora_B adapters)"));
  }
  checkpoint::ConsolidationSource* source = merged ? merged.get() : stored.get();
  options.config_json = model_config_for(flags, *source);
  options.companion_dirs = {flags.model_dir, flags.source};
  std::fprintf(stderr, "convert: %s checkpoint %s: %zu tensors, %zu aliases -> %s (%s)\n", kind.c_str(),
               flags.source.c_str(), source->tensors().size(), source->aliases().size(), flags.out.c_str(),
               flags.dtype.c_str());
  const checkpoint::ConvertReport report =
      value_or_throw(checkpoint::consolidate_to_safetensors(*source, flags.out, options));
  std::printf(
      "wrote %zu tensors (%s) in %zu safetensors file%s to %s in %.2f s (last %.2f s: fsync, rename): %s; "
      "peak RSS %s\n",
      report.tensors, format_bytes(report.tensor_bytes).c_str(), report.files, report.files == 1 ? "" : "s",
      flags.out.c_str(), report.seconds, report.finish_seconds,
      format_rate(report.seconds > 0 ? report.file_bytes / report.seconds : 0).c_str(),
      format_bytes(peak_rss_bytes()).c_str());
  if (!report.tokenizer_files.empty()) {
    std::printf("copied %zu tokenizer file%s from %s\n", report.tokenizer_files.size(),
                report.tokenizer_files.size() == 1 ? "" : "s", report.tokenizer_dir.c_str());
  }
  if (!report.generation_config_from.empty()) {
    std::printf("generation_config.json: %s %s\n",
                report.generation_config_from == "config.json" ? "derived from" : "copied from",
                report.generation_config_from.c_str());
  }
  print_missing_companions(report, kind);
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto flags = std::make_shared<ConvertFlags>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Consolidate a tierzero, DeepSpeed ZeRO-1/2/3 (or universal) or PyTorch DCP checkpoint into Hugging Face "
      "safetensors");
  cmd->add_option("SRC", flags->source, "Checkpoint directory (the one holding `latest`)")->required();
  cmd->add_option("OUT", flags->out, "Output directory; must not exist or be empty")->required();
  CLI::Option* dtype =
      cmd->add_option("--dtype", flags->dtype, "bf16 | fp16 | fp32 (default bf16; round to nearest even)");
  CLI::Option* max_shard_size =
      cmd->add_option("--max-shard-size", flags->max_shard_size, "Tensor bytes per output file (default 5GB)");
  cmd->add_option("--tag", flags->tag, "Checkpoint tag to convert (default: the one in SRC/latest)");
  CLI::Option* prefix =
      cmd->add_option("--prefix", flags->prefix,
                      "PyTorch DCP: convert only the tensors named PREFIX... and drop PREFIX (e.g. 'model.')");
  CLI::Option* backend =
      cmd->add_option("--aio-backend", flags->backend, "Output I/O: auto | io_uring | libaio | sync (default auto)");
  CLI::Option* block_size =
      cmd->add_option("--aio-block-size", flags->block_size, "Output I/O: bytes per write (default 1MiB)");
  CLI::Option* queue_depth =
      cmd->add_option("--aio-queue-depth", flags->queue_depth, "Output I/O: writes in flight (default 32)")
          ->check(whole_number_in(1, 4096));
  cmd->add_flag("--no-progress", flags->no_progress, "No progress bar");
  CLI::Option* model =
      cmd->add_option("--model", flags->model_dir,
                      "Hugging Face model directory the checkpoint was trained from: its tokenizer files and "
                      "generation_config.json are copied into OUT, its config.json too when the checkpoint has none; "
                      "for a LoRA run's checkpoint, the base the adapters are merged into (required)");
  CLI::Option* adapter =
      cmd->add_flag("--adapter", flags->adapter,
                    "A LoRA run's checkpoint: write its adapters as a PEFT adapter directory (adapter_config.json, "
                    "fp32 adapter_model.safetensors) instead of the merged model");
  CLI::Option* model_config =
      cmd->add_option("--model-config", flags->model_config,
                      "Hugging Face config.json written to OUT (instead of the checkpoint's or --model's)");
  cmd->add_option("--to", flags->to,
                  "safetensors (default) | deepspeed: write a tierzero checkpoint as a DeepSpeed ZeRO checkpoint "
                  "(same stage) that DeepSpeed's load_checkpoint resumes from");
  flags->safetensors_only = {dtype,       max_shard_size, prefix,  backend,     block_size,
                             queue_depth, model,          adapter, model_config};
  flags->deepspeed_only = {
      cmd->add_option("--world-size", flags->world_size,
                      "--to deepspeed: the DeepSpeed run's data-parallel world size (default: the saved one)")
          ->check(whole_number_in(1, 1'000'000)),
      cmd->add_option(
          "--ds-config", flags->ds_config,
          "--to deepspeed: the ds_config of the DeepSpeed run (optimizer, scheduler, fp16/bf16, clipping)")};
  cmd->callback([flags] { run_convert(*flags); });
}

}  // namespace tierzero::tools
