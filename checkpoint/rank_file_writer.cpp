#include "checkpoint/rank_file_writer.h"

#include <fmt/format.h>

namespace tierzero::checkpoint {

RankFileWriter::RankFileWriter(WritableFile file, const CheckpointOptions& options)
    : file_(std::move(file)),
      level_(options.compression_level),
      threads_(options.compression_threads),
      file_hash_(XXH3_createState()) {
  XXH3_64bits_reset(file_hash_);
}

RankFileWriter::~RankFileWriter() {
  XXH3_freeState(file_hash_);
  ZSTD_freeCCtx(cctx_);
}

Status RankFileWriter::store(std::span<const std::byte> bytes) {
  XXH3_64bits_update(file_hash_, bytes.data(), bytes.size());
  return file_.append(bytes);
}

Status RankFileWriter::compress(std::span<const std::byte> bytes) {
  if (cctx_ == nullptr) {
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
    if (threads_ > 0) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, static_cast<int>(threads_));
    out_buffer_.resize(ZSTD_CStreamOutSize() * 16);
  }
  ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_only);
  ZSTD_CCtx_setPledgedSrcSize(cctx_, bytes.size());
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  size_t remaining = 0;
  do {
    ZSTD_outBuffer out{out_buffer_.data(), out_buffer_.size(), 0};
    remaining = ZSTD_compressStream2(cctx_, &out, &in, ZSTD_e_end);
    if (ZSTD_isError(remaining)) {
      return internal_error(fmt::format("zstd compression of {} failed: {}", file_.path(), ZSTD_getErrorName(remaining)));
    }
    TZ_RETURN_IF_ERROR(store(std::span(out_buffer_.data(), out.pos)));
  } while (remaining != 0);
  return {};
}

Status RankFileWriter::add_section(SectionRecord section, std::span<const std::byte> bytes) {
  section.offset = file_.size();
  section.raw_bytes = bytes.size();
  section.compressed = level_ > 0;
  section.xxh3 = XXH3_64bits(bytes.data(), bytes.size());
  TZ_RETURN_IF_ERROR(section.compressed ? compress(bytes) : store(bytes));
  section.stored_bytes = file_.size() - section.offset;
  sections_.push_back(section);
  return {};
}

Status RankFileWriter::finish(RankFileRecord& record) {
  TZ_RETURN_IF_ERROR(file_.sync());
  TZ_RETURN_IF_ERROR(file_.close());
  record.bytes = file_.size();
  record.xxh3 = XXH3_64bits_digest(file_hash_);
  record.sections = sections_;
  return {};
}

}  // namespace tierzero::checkpoint
