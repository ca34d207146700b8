#include "checkpoint/engine_format/internal/rank_file_writer.h"

#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

namespace tierzero::checkpoint {

RankFileWriter::RankFileWriter(std::unique_ptr<StreamWriter> stream, const CheckpointOptions& options)
    : stream_(std::move(stream)), level_(options.compression_level), threads_(options.compression_threads) {}

RankFileWriter::~RankFileWriter() { ZSTD_freeCCtx(cctx_); }

Result<std::unique_ptr<RankFileWriter>> RankFileWriter::create(fs::FileSystem& fs, nvme::IoEngine& engine,
                                                               const std::string& path, uint64_t raw_bytes,
                                                               const CheckpointOptions& options) {
  const uint64_t reserve = options.compression_level > 0 ? 0 : raw_bytes;
  TZ_ASSIGN_OR_RETURN(auto stream, StreamWriter::create(fs, engine, path, reserve,
                                                        {.borrowed = options.write_buffers, .hashed = true}));
  return std::unique_ptr<RankFileWriter>(new RankFileWriter(std::move(stream), options));
}

// The raw bytes, their section's digest taken by the stream as it drains (raw_ranges_).
Status RankFileWriter::store(std::span<const std::byte> bytes) {
  const size_t range = stream_->begin_range();
  const Status status = stream_->append(bytes);
  stream_->end_range(range);
  raw_ranges_.push_back({sections_.size(), range});
  return status;
}

void RankFileWriter::begin_frame(uint64_t raw_bytes) {
  if (cctx_ == nullptr) {
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
    if (threads_ > 0) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, static_cast<int>(threads_));
  }
  ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_only);
  ZSTD_CCtx_setPledgedSrcSize(cctx_, raw_bytes);
}

// Feeds `bytes` to the open frame, compressed straight into the stream's staging buffers; `last`
// ends the frame.
Status RankFileWriter::compress_piece(std::span<const std::byte> bytes, bool last) {
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  const ZSTD_EndDirective mode = last ? ZSTD_e_end : ZSTD_e_continue;
  size_t remaining = 0;
  do {
    TZ_ASSIGN_OR_RETURN(std::span<std::byte> free, stream_->reserve());
    ZSTD_outBuffer out{free.data(), free.size(), 0};
    remaining = ZSTD_compressStream2(cctx_, &out, &in, mode);
    if (ZSTD_isError(remaining)) {
      return internal_error(
          fmt::format("zstd compression of {} failed: {}", stream_->path(), ZSTD_getErrorName(remaining)));
    }
    TZ_RETURN_IF_ERROR(stream_->commit(out.pos));
  } while (last ? remaining != 0 : in.pos < in.size);
  return {};
}

// One zstd frame of the whole section.
Status RankFileWriter::compress(std::span<const std::byte> bytes) {
  begin_frame(bytes.size());
  return compress_piece(bytes, /*last=*/true);
}

Status RankFileWriter::add_section(SectionRecord section, std::span<const std::byte> bytes, bool compressible) {
  section.offset = stream_->size();
  section.raw_bytes = bytes.size();
  section.compressed = level_ > 0 && compressible;
  if (section.compressed) {
    section.xxh3 = XXH3_64bits(bytes.data(), bytes.size());
    TZ_RETURN_IF_ERROR(compress(bytes));
  } else {
    TZ_RETURN_IF_ERROR(store(bytes));
  }
  section.stored_bytes = stream_->size() - section.offset;
  sections_.push_back(section);
  return {};
}

Status RankFileWriter::add_section(SectionRecord section, uint64_t raw_bytes, const SectionFill& fill,
                                   bool compressible) {
  section.offset = stream_->size();
  section.raw_bytes = raw_bytes;
  section.compressed = level_ > 0 && compressible;
  TZ_RETURN_IF_ERROR(section.compressed ? fill_compressed(section, fill) : fill_raw(fill, raw_bytes));
  section.stored_bytes = stream_->size() - section.offset;
  sections_.push_back(section);
  return {};
}

// Straight into the stream's staging buffers; the stream takes the section's digest as it drains.
Status RankFileWriter::fill_raw(const SectionFill& fill, uint64_t raw_bytes) {
  const size_t range = stream_->begin_range();
  Status status;
  for (uint64_t done = 0; done < raw_bytes && status.ok();) {
    Result<std::span<std::byte>> free = stream_->reserve();
    status = free.status();
    if (!status.ok()) break;
    const std::span<std::byte> piece = free->first(std::min<uint64_t>(free->size(), raw_bytes - done));
    status = fill(piece);
    if (status.ok()) status = stream_->commit(piece.size());
    done += piece.size();
  }
  stream_->end_range(range);
  raw_ranges_.push_back({sections_.size(), range});
  return status;
}

// One zstd frame through a scratch piece, the raw bytes hashed here (the digest is of raw bytes).
Status RankFileWriter::fill_compressed(SectionRecord& section, const SectionFill& fill) {
  constexpr uint64_t kPiece = 4 << 20;  // the scratch piece fill() writes into
  const uint64_t raw_bytes = section.raw_bytes;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(hash.get());
  std::vector<std::byte> scratch(std::min(raw_bytes, kPiece));
  begin_frame(raw_bytes);
  uint64_t done = 0;
  do {  // once for an empty section: its frame still ends
    const std::span<std::byte> piece =
        std::span<std::byte>(scratch).first(std::min<uint64_t>(scratch.size(), raw_bytes - done));
    if (!piece.empty()) TZ_RETURN_IF_ERROR(fill(piece));
    XXH3_64bits_update(hash.get(), piece.data(), piece.size());
    done += piece.size();
    TZ_RETURN_IF_ERROR(compress_piece(piece, /*last=*/done == raw_bytes));
  } while (done < raw_bytes);
  section.xxh3 = XXH3_64bits_digest(hash.get());
  return {};
}

Status RankFileWriter::finish(RankFileRecord& record) {
  TZ_RETURN_IF_ERROR(stream_->finish());
  for (const auto& [section, range] : raw_ranges_) sections_[section].xxh3 = stream_->range_digest(range);
  record.bytes = stream_->size();
  record.xxh3 = stream_->file_digest();
  record.sections = sections_;
  return {};
}

}  // namespace tierzero::checkpoint
