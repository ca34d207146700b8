// Private: writes one rank file section by section (raw or one zstd frame each), hashing the
// raw bytes per section and the stored bytes for the whole file.
#pragma once

#include <memory>
#include <span>

#include <xxhash.h>
#include <zstd.h>

#include "checkpoint/durable_fs.h"
#include "checkpoint/manifest_io.h"

namespace tierzero::checkpoint {

class RankFileWriter {
 public:
  RankFileWriter(WritableFile file, const CheckpointOptions& options);
  ~RankFileWriter();
  RankFileWriter(const RankFileWriter&) = delete;
  RankFileWriter& operator=(const RankFileWriter&) = delete;

  // Appends `bytes` as the next section; `section` names it and receives offset, sizes, checksum.
  Status add_section(SectionRecord section, std::span<const std::byte> bytes);
  // fsyncs and closes the file, filling the record's size, checksum and sections.
  Status finish(RankFileRecord& record);

 private:
  Status store(std::span<const std::byte> bytes);
  Status compress(std::span<const std::byte> bytes);
  WritableFile file_;
  int level_;
  uint32_t threads_;
  XXH3_state_t* file_hash_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<std::byte> out_buffer_;
  std::vector<SectionRecord> sections_;
};

}  // namespace tierzero::checkpoint
