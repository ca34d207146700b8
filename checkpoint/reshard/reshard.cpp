#include "checkpoint/reshard/reshard.h"

#include <chrono>
#include <filesystem>
#include <vector>

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::checkpoint {

Result<ReshardReport> reshard_engine_checkpoint(const std::string& src, const std::string& out,
                                                const ReshardOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.world_size == 0) return invalid_argument("reshard: the new world size must be at least 1");
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(src, out, ec)) {
    return invalid_argument("reshard: OUT " + out + " is the source checkpoint's folder; write the copy elsewhere");
  }
  TZ_ASSIGN_OR_RETURN(auto reader, CheckpointReader::open(src, options.tag));
  CheckpointManifest manifest = reader->manifest();
  const uint32_t from = manifest.world_size;
  manifest.world_size = options.world_size;
  const std::string& tag = reader->tag();
  CheckpointOptions write_options;
  write_options.compression_level = options.compression_level;

  ReshardReport report{tag, from, options.world_size, 0, 0};
  TZ_RETURN_IF_ERROR(begin_checkpoint(out, tag, manifest, write_options));
  for (uint32_t rank = 0; rank < options.world_size; ++rank) {
    std::vector<std::vector<std::vector<std::byte>>> buffers(manifest.groups.size());
    RankData data;
    if (rank_stores_groups(manifest.zero_stage, rank)) {
      data.group_states.resize(manifest.groups.size());
      for (size_t g = 0; g < manifest.groups.size(); ++g) {
        const FlatGroup& group = manifest.groups[g];
        const uint64_t numel = partition_numel(group, manifest.zero_stage, options.world_size, manifest.alignment);
        for (size_t s = 0; s < group.states.size(); ++s) {
          const StateSpec& state = group.states[s];
          std::vector<std::byte> bytes(numel * element_size(state.dtype));
          TZ_RETURN_IF_ERROR(reader->read_partition(g, s, options.world_size, rank, bytes)
                                 .with_context("resharding group " + std::to_string(g) + " state '" + state.name +
                                               "' for rank " + std::to_string(rank)));
          std::vector<std::vector<std::byte>> parts;
          if (state.codec == StateCodec::kRaw) {
            parts.push_back(std::move(bytes));
          } else {  // encoded again at the new partitioning (8-bit moments: new codes, see encode_partition)
            TZ_ASSIGN_OR_RETURN(parts, encode_partition(state, {reinterpret_cast<const float*>(bytes.data()), numel}));
          }
          for (std::vector<std::byte>& part : parts) {
            report.state_bytes += part.size();
            data.group_states[g].push_back(buffers[g].emplace_back(std::move(part)));
          }
        }
      }
    }
    std::vector<std::vector<std::byte>> replicated;
    if (rank == 0) {
      for (size_t i = 0; i < manifest.replicated.size(); ++i) {
        const ReplicatedTensor& t = manifest.replicated[i];
        replicated.emplace_back(static_cast<uint64_t>(t.spec.numel()) * element_size(t.dtype));
        TZ_RETURN_IF_ERROR(reader->read_replicated(i, 0, replicated.back()));
        data.replicated.push_back(replicated.back());
      }
    }
    if (rank < from) data.rank_state = reader->rank_state(rank);
    TZ_RETURN_IF_ERROR(write_checkpoint_rank(out, tag, manifest, rank, data, write_options));
  }
  TZ_RETURN_IF_ERROR(commit_checkpoint(out, tag, manifest, write_options));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tierzero::checkpoint
