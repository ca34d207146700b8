// `tierzero convert SRC OUT`: a tierzero, DeepSpeed ZeRO (or universal) or PyTorch DCP checkpoint ->
// Hugging Face safetensors.
#include <sys/resource.h>

#include <cstdio>
#include <memory>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/dcp/dcp_source.h"
#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "common/units.h"
#include "tools/commands.h"

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
};

// Picks the reader by what SRC holds: a tierzero manifest, DeepSpeed's .pt files, a DeepSpeed
// universal checkpoint (latest_universal, zero/), or a PyTorch DCP folder (.metadata, *.distcp).
std::unique_ptr<checkpoint::ConsolidationSource> open_source(const ConvertFlags& flags, std::string& kind) {
  if (checkpoint::is_engine_checkpoint(flags.source, flags.tag)) {
    kind = "tierzero";
    return value_or_throw(checkpoint::open_engine_checkpoint_source(flags.source, flags.tag));
  }
  if (checkpoint::is_dcp_checkpoint(flags.source)) {
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

void run_convert(const ConvertFlags& flags) {
  checkpoint::ConvertOptions options;
  options.dtype = value_or_throw(checkpoint::parse_output_dtype(flags.dtype));
  options.max_shard_bytes = value_or_throw(parse_bytes(flags.max_shard_size));
  options.io.backend = value_or_throw(nvme::parse_backend(flags.backend));
  if (!flags.block_size.empty()) options.io.block_size = value_or_throw(parse_bytes(flags.block_size));
  if (flags.queue_depth > 0) options.io.queue_depth = flags.queue_depth;
  options.progress = !flags.no_progress;
  std::string kind;
  auto source = open_source(flags, kind);
  std::fprintf(stderr, "convert: %s checkpoint %s: %zu tensors, %zu aliases -> %s (%s)\n", kind.c_str(),
               flags.source.c_str(), source->tensors().size(), source->aliases().size(), flags.out.c_str(),
               flags.dtype.c_str());
  const checkpoint::ConvertReport report =
      value_or_throw(checkpoint::consolidate_to_safetensors(*source, flags.out, options));
  std::printf("wrote %zu tensors (%s) in %zu safetensors file%s to %s in %.2f s (last %.2f s: fsync, rename): %s; "
              "peak RSS %s\n",
              report.tensors, format_bytes(report.tensor_bytes).c_str(), report.files, report.files == 1 ? "" : "s",
              flags.out.c_str(), report.seconds, report.finish_seconds,
              format_rate(report.seconds > 0 ? report.file_bytes / report.seconds : 0).c_str(),
              format_bytes(peak_rss_bytes()).c_str());
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
  cmd->add_option("--dtype", flags->dtype, "bf16 | fp16 | fp32 (default bf16; round to nearest even)");
  cmd->add_option("--max-shard-size", flags->max_shard_size, "Tensor bytes per output file (default 5GB)");
  cmd->add_option("--tag", flags->tag, "Checkpoint tag to convert (default: the one in SRC/latest)");
  cmd->add_option("--prefix", flags->prefix,
                  "PyTorch DCP: convert only the tensors named PREFIX... and drop PREFIX (e.g. 'model.')");
  cmd->add_option("--aio-backend", flags->backend, "Output I/O: auto | io_uring | libaio | sync (default auto)");
  cmd->add_option("--aio-block-size", flags->block_size, "Output I/O: bytes per write (default 1MiB)");
  cmd->add_option("--aio-queue-depth", flags->queue_depth, "Output I/O: writes in flight (default 32)");
  cmd->add_flag("--no-progress", flags->no_progress, "No progress bar");
  cmd->callback([flags] { run_convert(*flags); });
}

}  // namespace tierzero::tools
