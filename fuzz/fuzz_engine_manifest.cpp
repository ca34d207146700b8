// libFuzzer harness: an engine checkpoint's metadata (checkpoint/engine_format/manifest_io.cpp,
// checksum_file.cpp). The bytes are parsed as checksums.txt, as one rank record and as a stored
// manifest; an accepted manifest has its partition layout computed at several world sizes, as the
// reader does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint/engine_format/internal/manifest_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::checkpoint;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto entries = parse_checksum_file(text, "checksums.txt"); entries.ok()) {
    if (checksum_file_text(*entries) != text) __builtin_trap();  // only the exact text is accepted
  }
  auto record_json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!record_json.is_discarded()) (void)parse_rank_record(record_json, "rank_00000.json");
  auto stored = parse_stored_manifest(text, "manifest.json");
  if (!stored.ok()) return 0;
  const CheckpointManifest& m = stored->manifest;
  for (const FlatGroup& g : m.groups) {
    for (uint32_t world : {m.world_size, 1u, 3u}) {
      for (uint32_t rank : {0u, world - 1}) {
        (void)partition_numel(g, m.zero_stage, world, m.alignment);
        if (g.params.size() <= 256) (void)partition_segments(g, m.zero_stage, world, m.alignment, rank);
      }
    }
  }
  (void)stored_manifest_text(*stored);
  return 0;
}
