// `tierzero checkpoint verify|inspect DIR`: check a tierzero checkpoint's files, or describe it;
// `tierzero checkpoint reshard SRC OUT --world-size N`: rewrite it for another world size.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/reshard/reshard.h"
#include "common/common.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

struct CheckpointFlags {
  std::string dir;
  std::string tag;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void run_verify(const CheckpointFlags& flags) {
  const checkpoint::VerifyReport report = value_or_throw(checkpoint::verify_checkpoint(flags.dir, flags.tag));
  std::printf("OK %s: %u rank files, %s, sizes and XXH3 checksums match the manifest, every section decodes\n",
              report.path.c_str(), report.files_checked, format_bytes(report.bytes_checked).c_str());
}

void run_inspect(const CheckpointFlags& flags) {
  auto reader = value_or_throw(checkpoint::CheckpointReader::open(flags.dir, flags.tag));
  const checkpoint::CheckpointManifest& m = reader->manifest();
  uint64_t disk_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(reader->path())) {
    if (entry.is_regular_file()) disk_bytes += entry.file_size();
  }
  uint64_t params = 0;
  uint64_t state_bytes = 0;
  for (const auto& g : m.groups) {
    params += g.numel();
    for (const auto& s : g.states)
      for (const auto& part : checkpoint::state_parts(s))
        state_bytes += checkpoint::part_numel(part, g.numel()) * element_bits(part.dtype) / 8;
  }
  std::printf("checkpoint   %s (tag %s)\n", reader->path().c_str(), reader->tag().c_str());
  std::printf("zero stage   %d\n", m.zero_stage);
  std::printf("world size   %u\n", m.world_size);
  std::printf("step         %lld\n", static_cast<long long>(m.step));
  std::printf("parameters   %llu in %zu group%s\n", static_cast<unsigned long long>(params), m.groups.size(),
              m.groups.size() == 1 ? "" : "s");
  std::printf("bytes        %s on disk; %s of optimizer state unpadded\n", format_bytes(disk_bytes).c_str(),
              format_bytes(state_bytes).c_str());
  std::printf("loss scaler  %s\n", m.loss_scaler.dump().c_str());
  std::printf("lr scheduler %s\n", m.lr_scheduler.dump().c_str());
  std::printf("data         %s\n", m.data_position.dump().c_str());
  std::printf("model config %s\n", m.model_config_json.empty() ? "none" : "present");
  for (size_t g = 0; g < m.groups.size(); ++g) {
    std::string states;
    for (const auto& s : m.groups[g].states) {  // "fp32:F32", encoded "fp32:hi BF16+residual I16"
      states += " " + s.name + ":";
      for (const auto& part : checkpoint::state_parts(s)) {
        if (states.back() != ':') states += "+";
        states += (part.name.empty() ? "" : std::string(part.name) + " ") + std::string(checkpoint::dtype_name(part.dtype));
      }
    }
    std::printf("group %zu      %zu tensors, %llu elements, %llu per rank; states%s\n", g, m.groups[g].params.size(),
                static_cast<unsigned long long>(m.groups[g].numel()),
                static_cast<unsigned long long>(
                    checkpoint::partition_numel(m.groups[g], m.zero_stage, m.world_size, m.alignment)),
                states.c_str());
    for (const auto& p : m.groups[g].params) {
      std::printf("  %-60s %-20s %lld\n", p.name.c_str(), shape_text(p.shape).c_str(),
                  static_cast<long long>(p.numel()));
    }
  }
  if (!m.replicated.empty()) std::printf("replicated   %zu tensors\n", m.replicated.size());
  for (const auto& r : m.replicated) {
    std::printf("  %-60s %-20s %s\n", r.spec.name.c_str(), shape_text(r.spec.shape).c_str(),
                std::string(checkpoint::dtype_name(r.dtype)).c_str());
  }
  for (const auto& [alias, source] : m.aliases) std::printf("alias        %s -> %s\n", alias.c_str(), source.c_str());
}

struct ReshardFlags {
  std::string source;
  std::string out;
  checkpoint::ReshardOptions options;
};

void run_reshard(const ReshardFlags& flags) {
  const checkpoint::ReshardReport report =
      value_or_throw(checkpoint::reshard_engine_checkpoint(flags.source, flags.out, flags.options));
  std::printf(
      "resharded %s (tag %s) from %u to %u ranks into %s: %s of partitions in %.2f s; verify with "
      "`tierzero checkpoint verify %s`\n",
      flags.source.c_str(), report.tag.c_str(), report.from_world_size, report.to_world_size, flags.out.c_str(),
      format_bytes(report.state_bytes).c_str(), report.seconds, flags.out.c_str());
}

void add_dir_options(CLI::App* cmd, const std::shared_ptr<CheckpointFlags>& flags) {
  cmd->add_option("DIR", flags->dir, "Checkpoint directory (the one holding `latest`)")->required();
  cmd->add_option("--tag", flags->tag, "Tag to read (default: the one in DIR/latest)");
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("checkpoint", "Check, describe or reshard a tierzero checkpoint: verify, inspect, reshard");
  cmd->require_subcommand(1);
  auto verify_flags = std::make_shared<CheckpointFlags>();
  CLI::App* verify = cmd->add_subcommand("verify", "Check every rank file's size and XXH3 checksum; name a bad file");
  add_dir_options(verify, verify_flags);
  verify->callback([verify_flags] { run_verify(*verify_flags); });
  auto inspect_flags = std::make_shared<CheckpointFlags>();
  CLI::App* inspect = cmd->add_subcommand("inspect", "Print stage, world size, step, tensors and bytes");
  add_dir_options(inspect, inspect_flags);
  inspect->callback([inspect_flags] { run_inspect(*inspect_flags); });
  auto reshard_flags = std::make_shared<ReshardFlags>();
  CLI::App* reshard = cmd->add_subcommand(
      "reshard", "Rewrite a checkpoint for another world size (checksummed; OUT/latest set only when complete)");
  reshard->add_option("SRC", reshard_flags->source, "Checkpoint directory (the one holding `latest`)")->required();
  reshard->add_option("OUT", reshard_flags->out, "Directory for the resharded checkpoint (same tag)")->required();
  reshard->add_option("--world-size", reshard_flags->options.world_size, "The new data-parallel world size")
      ->required()
      ->check(whole_number_in(1, 1'000'000));
  reshard->add_option("--tag", reshard_flags->options.tag, "Tag to reshard (default: the one in SRC/latest)");
  reshard
      ->add_option("--compression-level", reshard_flags->options.compression_level,
                   "0: raw sections (default); 1..22: zstd")
      ->check(whole_number_in(0, 22));
  reshard->callback([reshard_flags] { run_reshard(*reshard_flags); });
}

}  // namespace tierzero::tools
