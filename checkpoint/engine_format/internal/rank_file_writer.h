// Private: writes one rank file section by section (raw or one zstd frame each) through a
// StreamWriter (nvme::IoEngine, O_DIRECT where allowed). The digests: the whole file's and each raw
// section's are the stream's (Options::hashed: taken from the staging buffers as they drain, off the
// fill's path); a compressed section's, of its raw bytes, is taken here as they are compressed.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <zstd.h>

#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {

class RankFileWriter {
 public:
  // Creates (truncates) `path` on `fs`; errors name it. `raw_bytes`, the sum of the sections' sizes to
  // come, is reserved up front when sections are stored uncompressed (their exact total), so a
  // full disk fails here and the writes are not file-extending ones.
  static Result<std::unique_ptr<RankFileWriter>> create(fs::FileSystem& fs, nvme::IoEngine& engine,
                                                        const std::string& path, uint64_t raw_bytes,
                                                        const CheckpointOptions& options);
  ~RankFileWriter();
  RankFileWriter(const RankFileWriter&) = delete;
  RankFileWriter& operator=(const RankFileWriter&) = delete;

  // Appends `bytes` as the next section; `section` names it and receives offset, sizes, checksum.
  // It is one zstd frame when the options' compression level is > 0 and `compressible` is set.
  Status add_section(SectionRecord section, std::span<const std::byte> bytes, bool compressible = true);
  // The same section from `fill`, `raw_bytes` of it asked for in order, piece by piece (raw: straight
  // into the stream's staging buffers; compressed: through a scratch piece). Same bytes on disk.
  Status add_section(SectionRecord section, uint64_t raw_bytes, const SectionFill& fill, bool compressible = true);
  // Writes what is staged and fdatasyncs, filling the record's size, checksum and sections.
  Status finish(RankFileRecord& record);

 private:
  RankFileWriter(std::unique_ptr<StreamWriter> stream, const CheckpointOptions& options);
  // Appends `bytes` uncompressed as the next section (its digest the stream's range).
  Status store(std::span<const std::byte> bytes);
  // The next section's `raw_bytes` from `fill`, uncompressed (its digest the stream's range).
  Status fill_raw(const SectionFill& fill, uint64_t raw_bytes);
  // `section`'s raw bytes from `fill` as one zstd frame; sets section.xxh3.
  Status fill_compressed(SectionRecord& section, const SectionFill& fill);
  Status compress(std::span<const std::byte> bytes);
  // Starts a zstd frame of `raw_bytes` (compress_piece() then feeds it, the last piece ending it).
  void begin_frame(uint64_t raw_bytes);
  Status compress_piece(std::span<const std::byte> bytes, bool last);
  std::unique_ptr<StreamWriter> stream_;
  int level_;
  uint32_t threads_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<SectionRecord> sections_;
  // (index into sections_, the stream's range id) of each raw section: its digest, read at finish().
  std::vector<std::pair<size_t, size_t>> raw_ranges_;
};

}  // namespace tierzero::checkpoint
