// The record optimizer: the sub-group pipeline of record_adam.h over the records of offload/'s
// RecordCache (offload/offload.h), which holds them in pinned memory or moves them through the
// staging buffers.
#include "engine/zero/internal/record_adam.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/storage/storage.h"
#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/offloaded_step.h"
#include "engine/zero/internal/stored_records.h"
#include "offload/offload.h"

namespace tierzero::engine {
namespace {

class CachedRecordAdam final : public PartitionOptimizer, private StateStore, private StoredRecords {
 public:
  explicit CachedRecordAdam(RecordAdamSetup setup)
      : setup_(std::move(setup)),
        layout_(record_layout(setup_.state_dtype, setup_.compact.compact_master)),
        numel_(setup_.numel),
        step_(setup_) {
    const NvmeOptimizerOptions& nvme = setup_.nvme;
    const bool files = !nvme.paths.empty();
    if (files && (nvme.buffer_count < 1 || setup_.buffers.size() != static_cast<size_t>(nvme.buffer_count)))
      throw Error(invalid_argument("zero_optimization.offload_optimizer.buffer_count=" +
                                   std::to_string(nvme.buffer_count) + " must be at least 1"));
    if (!files && !setup_.buffers.empty())
      throw Error(internal_error("record optimizer: swap buffers without an nvme_path"));
    slot_numel_ = std::max<int64_t>(1, std::min(setup_.sub_group_numel, numel_));
    groups_ = (numel_ + slot_numel_ - 1) / slot_numel_;
    if (setup_.state_dtype != at::kFloat && setup_.state_dtype != at::kBFloat16 && setup_.state_dtype != at::kChar)
      throw Error(internal_error("record optimizer: moments must be fp32, bf16 or 8-bit"));
    if (setup_.compact.moments_8bit != (setup_.state_dtype == at::kChar))
      throw Error(internal_error("record optimizer: 8-bit moments and the state dtype disagree"));
    if (setup_.compact.compact_master &&
        (!setup_.compact.hi.defined() || setup_.compact.hi.scalar_type() != at::kBFloat16 ||
         setup_.compact.hi.numel() != numel_))
      throw Error(
          internal_error("record optimizer: a compact master needs the partition's bf16 weights in host memory"));
    in_memory_ = files ? std::clamp<int64_t>(setup_.records_in_memory, 0, groups_) : groups_;
    for (const at::Tensor& buffer : setup_.buffers)
      if (buffer.scalar_type() != at::kByte || static_cast<uint64_t>(buffer.numel()) != record_bytes(slot_numel_))
        throw Error(internal_error("record optimizer: a pinned buffer is not one record of " +
                                   std::to_string(slot_numel_) + " elements (" +
                                   std::to_string(record_bytes(slot_numel_)) + " bytes)"));
    std::vector<uint64_t> sizes;
    for (int64_t k = 0; k < groups_; ++k) sizes.push_back(record_bytes(count_of(k)));
    cache_ = value_or_throw(offload::RecordCache::create(
        bytes_of(setup_.buffers), in_memory_ > 0 ? bytes_of(setup_.memory_records) : std::span<std::byte>(),
        {.files = {.paths = nvme.paths, .io = nvme.io, .rank = setup_.rank, .role = kOptimizerSwap},
         .record_bytes = std::move(sizes),
         .memory_records = in_memory_,
         .read_ahead = nvme.pipeline_read,
         .write_behind = nvme.pipeline_write,
         .spread_memory = setup_.spread_records}));
    write_initial_state();
    mark_traffic();  // a step's traffic, not the set-up's
  }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
            StepProgress* progress, GradsFinal* grads_final) override {
    // A save in flight reads through the buffers: the step waits for it whole. Without buffers it
    // reads the block, and the step follows it piece by piece (OffloadedStep::run).
    if (cache_->buffer_count() > 0) step_.wait_for_save(numel_);
    step_.wait_copies();  // the last step's: params16 is rewritten
    written_mark_ = cache_->written_bytes();
    write_back_materialised();
    const double waited = cache_->wait_seconds();
    step_.run(*this, state_.step + 1, grad, grad_multiplier, lr, compute_partition, progress, grads_final);
    step_wait_s_ = cache_->wait_seconds() - waited;
    ++state_.step;
    step_read_bytes_ = cache_->read_bytes() - read_mark_;
    read_mark_ = cache_->read_bytes();
  }

  // The pass of record_adam.h: the records kept in memory ahead of the first streamed one,
  // then the others in the cache's alternating sweep (starting on the records the buffers kept from
  // the last pass; its first reads queued here), those in memory among them in the same order. A
  // record in memory is stepped in slices of at most kPublishSlice elements, in the record's
  // direction; a streamed one whole (its buffer is acquired once). Front to back, each piece is
  // published as it finishes; back to front, the partition is published at the end (the readers
  // following behind need it front first). Inside the backward every record runs back to front, the
  // gradients' order.
  std::vector<StepPiece> pieces(bool inside_backward) override {
    using Sweep = offload::RecordCache::Sweep;
    pass_ = cache_->pass(inside_backward ? Sweep::kBackToFront : Sweep::kAlternate);
    again_ = inside_backward;  // the next step's pass is this one again
    const bool backward = inside_backward || (pass_.size() > 1 && pass_.front() > pass_.back());
    const int64_t first_streamed = pass_.empty() ? groups_ : std::min(pass_.front(), pass_.back());
    const int64_t ahead = inside_backward ? 0 : first_streamed;
    std::vector<int64_t> records(static_cast<size_t>(groups_));
    std::iota(records.begin(), records.end(), 0);
    if (backward) std::reverse(records.begin() + ahead, records.end());
    order_.clear();
    pass_position_.clear();
    std::vector<StepPiece> pieces;
    size_t position = 0;  // the next streamed record's place in pass_
    for (size_t r = 0; r < records.size(); ++r) {
      const int64_t k = records[r];
      const bool publish = !inside_backward && (k < first_streamed || !backward);
      const int64_t count = count_of(k);
      const int64_t slice = cache_->in_memory(k) ? std::min(count, kPublishSlice) : count;
      const size_t first = pieces.size();
      for (int64_t begin = 0; begin < count; begin += slice) {
        pieces.push_back({.begin = k * slot_numel_ + begin,
                          .count = std::min(slice, count - begin),
                          .publish = publish,
                          .holdable = cache_->in_memory(k)});  // a streamed record's buffer is taken again
        order_.push_back(k);
        pass_position_.push_back(position);
      }
      if (backward && static_cast<int64_t>(r) >= ahead) std::reverse(pieces.begin() + first, pieces.end());
      if (!cache_->in_memory(k)) ++position;
    }
    throw_if_error(cache_->prefetch_ahead(pass_, 0));
    return pieces;
  }

  StateSpans acquire(size_t i, const StepPiece& piece) override {
    const int64_t k = order_[i];
    if (!cache_->in_memory(k)) throw_if_error(cache_->prefetch_ahead(pass_, pass_position_[i], again_));
    const at::Tensor record = byte_tensor(value_or_throw(cache_->acquire(k, Access::kRead)));
    const int64_t count = count_of(k);
    const int64_t at = piece.begin - k * slot_numel_;  // a slice's first element in its record
    const at::Tensor master = record_part(record, 0, count).narrow(0, at, piece.count);
    return {.master = setup_.compact.compact_master ? nullptr : master.data_ptr<float>(),
            .residual = setup_.compact.compact_master ? static_cast<int16_t*>(master.data_ptr()) : nullptr,
            .exp_avg = moment_elements(record_part(record, 1, count), at, piece.count),
            .exp_avg_sq = moment_elements(record_part(record, 2, count), at, piece.count),
            .exp_avg_scales = moment_scales(record_part(record, 3, count), at, piece.count),
            .exp_avg_sq_scales = moment_scales(record_part(record, 4, count), at, piece.count)};
  }

  // Written behind, but for the last buffer_count records of an alternating pass, kept dirty in their
  // buffers (the next pass starts there): RecordCache::changed.
  void release(size_t i, const StepPiece&, std::shared_ptr<CopyDone> reader) override {
    const Release how =
        cache_->in_memory(order_[i]) ? Release::kWrite : cache_->changed(pass_, pass_position_[i], again_);
    throw_if_error(cache_->release(order_[i], how, std::move(reader)));
  }

  void finish() override { throw_if_error(cache_->wait_writes()); }

  // The stored records: the cache's, read whole (the next one queued behind it); the bf16 weights of
  // a compact master from host memory.
  Status acquire(int64_t k, bool overwrite) override {
    TZ_ASSIGN_OR_RETURN(held_, cache_->acquire(k, overwrite ? Access::kOverwrite : Access::kRead));
    if (!overwrite && k + 1 < groups_ && cache_->buffer_count() >= 2) TZ_RETURN_IF_ERROR(cache_->prefetch(k + 1));
    return Status();
  }
  std::span<std::byte> part(int64_t k, const StoredPart& part) override {
    const int64_t count = count_of(k);
    if (part.where == RecordPart::kEnd)
      return {static_cast<std::byte*>(setup_.compact.hi.data_ptr()) + k * slot_numel_ * 2,
              static_cast<size_t>(count * 2)};
    return held_.subspan(static_cast<size_t>(layout_.part_offset(part.where, count)),
                         static_cast<size_t>(layout_.part_bytes(part.where, count)));
  }
  Status release(int64_t k, bool written) override {
    held_ = {};
    return cache_->release(k, written ? Release::kWrite : Release::kClean);
  }

  AdamPartitionState& state() override {
    if (materialised_) return state_;
    throw_if_error(cache_->flush());
    at::Tensor* states[] = {&state_.master, &state_.exp_avg, &state_.exp_avg_sq};
    for (int s = 0; s < 3; ++s) *states[s] = at::empty({numel_}, at::TensorOptions().dtype(checkpoint_dtype(s)));
    for (int64_t k = 0; k < groups_; ++k) {
      const at::Tensor record = byte_tensor(value_or_throw(cache_->acquire(k, Access::kRead)));
      for (int s = 0; s < 3; ++s) {
        at::Tensor out = states[s]->narrow(0, k * slot_numel_, count_of(k));
        read_state(home(record, k, s), 0, bytes_of(out));
      }
      throw_if_error(cache_->release(k, Release::kClean));
    }
    materialised_ = true;
    return state_;
  }

  int64_t step_count() override { return state_.step; }

  StateReader state_reader(int s) override {
    write_back_materialised();        // a state() copy changed in place is what is saved
    throw_if_error(cache_->flush());  // the files hold every record from here on
    // A converted state (a compact layout saves through stored_readers) through state()'s copy.
    if (converts(s)) return PartitionOptimizer::state_reader(s);
    // State s's part of one record at a time, the next record's part read ahead while one is copied.
    return [this, s, k = int64_t{0}, offset = uint64_t{0}](std::span<std::byte> out) mutable -> Status {
      for (size_t filled = 0; filled < out.size();) {
        if (k >= groups_) return internal_error("record optimizer: state " + std::to_string(s) + " read past its end");
        const int64_t count = count_of(k);
        TZ_ASSIGN_OR_RETURN(std::span<const std::byte> part,
                            cache_->acquire_range(k, part_offset(s, count), part_offset(s + 1, count)));
        if (offset == 0 && k + 1 < groups_ && cache_->buffer_count() >= 2)
          TZ_RETURN_IF_ERROR(
              cache_->prefetch_range(k + 1, part_offset(s, count_of(k + 1)), part_offset(s + 1, count_of(k + 1))));
        const uint64_t n = std::min<uint64_t>(part.size() - offset, out.size() - filled);
        checkpoint::copy_in_parallel(out.subspan(filled, n), part.subspan(offset, n));
        TZ_RETURN_IF_ERROR(cache_->release(k, Release::kClean));
        filled += n;
        offset += n;
        if (offset == part.size()) {
          ++k;
          offset = 0;
        }
      }
      return Status();
    };
  }

  Status read_master(int64_t begin, std::span<float> out) override {
    try {
      write_back_materialised();  // a state() copy changed in place is what is read
      TZ_RETURN_IF_ERROR(cache_->flush());
      for (size_t done = 0; done < out.size();) {
        const int64_t e = begin + static_cast<int64_t>(done);
        const int64_t k = e / slot_numel_;
        if (e < 0 || k >= groups_)
          return internal_error("record optimizer: master weight " + std::to_string(e) + " read past the partition");
        // Sub-group k's master part, the record's first (its start aligned for O_DIRECT).
        TZ_ASSIGN_OR_RETURN(std::span<const std::byte> master,
                            cache_->acquire_range(k, 0, part_offset(1, count_of(k))));
        const int64_t offset = e - k * slot_numel_;
        const auto n =
            static_cast<size_t>(std::min<int64_t>(count_of(k) - offset, static_cast<int64_t>(out.size() - done)));
        read_state(home(byte_tensor(master), k, 0), offset, std::as_writable_bytes(out.subspan(done, n)));
        TZ_RETURN_IF_ERROR(cache_->release(k, Release::kClean));
        done += n;
      }
      return Status();
    } catch (const Error& e) {
      return e.status();
    }
  }

  Status load_state(const StateFill& fill, int64_t step) override {
    return replace_records(
        [&]() -> Status {
          Status status;
          std::vector<std::byte> scratch;
          for (int64_t k = 0; k < groups_ && status.ok(); ++k) {
            const at::Tensor record = byte_tensor(value_or_throw(cache_->acquire(k, Access::kOverwrite)));
            const int64_t count = count_of(k);
            for (int64_t begin = 0; begin < count && status.ok(); begin += kConvertPiece) {
              const int64_t n = std::min(kConvertPiece, count - begin);
              for (int s = 0; s < 3 && status.ok(); ++s) {
                scratch.resize(static_cast<size_t>(n) * c10::elementSize(checkpoint_dtype(s)));
                status = fill(s, k * slot_numel_ + begin, scratch);
                if (status.ok()) write_state(home(record, k, s), begin, scratch);
              }
            }
            throw_if_error(cache_->release(k, status.ok() ? Release::kWrite : Release::kClean));
          }
          return status;
        },
        step);
  }

  StoredLayout stored_layout() const override { return {.record = layout_, .record_numel = slot_numel_}; }

  bool hold_for_save(std::shared_ptr<SaveProgress> save) override {
    step_.hold_for_save(std::move(save));
    return true;
  }

  // A compact save: record by record, each read once (the next one read ahead), the bf16 weights
  // from host memory.
  std::vector<StateReader> stored_readers() override {
    write_back_materialised();        // a state() copy changed in place is what is saved
    throw_if_error(cache_->flush());  // the buffers' records clean: a read of them is their file's
    return engine::stored_readers(*this, stored_layout(), numel_);
  }

  // A resume at the same layout: each record acquired for overwrite, filled as stored, written behind.
  Status load_stored(const StoredFill& fill, int64_t step) override {
    return replace_records([&] { return load_stored_records(*this, stored_layout(), numel_, fill); }, step);
  }

  double last_copy_seconds() const override { return step_.last_copy_seconds(); }

  DeviceShareStats last_device_share() const override { return step_.last_device_share(); }

  std::vector<PartitionWrite> device_writes() const override { return step_.copies(); }

  std::string placement() const override {
    const std::string cpu = fmt::format("{}, {} threads", cpu_adam::simd_target_name(), setup_.adam->threads());
    if (setup_.nvme.paths.empty()) return fmt::format("cpu ({})", cpu);
    return fmt::format("nvme ({}; cpu {})",
                       cache_->has_files() ? cache_->describe() : "no file: every record in pinned memory", cpu);
  }

  std::string state_placement() const override {
    uint64_t in_memory = 0, total = 0;
    for (int64_t k = 0; k < groups_; ++k) (cache_->in_memory(k) ? in_memory : total) += record_bytes(count_of(k));
    total += in_memory;
    const double per_param = numel_ > 0 ? static_cast<double>(total) / static_cast<double>(numel_) : 0.0;
    const bool compact = setup_.compact.compact_master;
    const std::string moments = setup_.compact.moments_8bit
                                    ? std::string("8-bit moments")
                                    : fmt::format("{} moments", c10::toString(setup_.state_dtype));
    if (setup_.nvme.paths.empty())  // every record in memory (device "cpu")
      return fmt::format("host memory: {}, {}; {:.2f} bytes/param, {}{}",
                         compact ? "compact master (bf16 weights + int16 residual)" : "fp32 master", moments, per_param,
                         format_bytes(total), compact ? " (+ the 16-bit weights it shares)" : "");
    return fmt::format("{} of {} sub-group records in pinned memory ({}), {} on NVMe ({}); {}, {}: {:.2f} bytes/param",
                       in_memory_, groups_, format_bytes(in_memory), groups_ - in_memory_,
                       format_bytes(total - in_memory),
                       compact ? "compact master (int16 residual; its bf16 half the 16-bit weights)" : "fp32 master",
                       moments, per_param);
  }

  NvmeTraffic traffic() const override {
    return {.step_read_bytes = step_read_bytes_,
            .step_written_bytes = cache_->written_bytes() - written_mark_,
            .step_wait_s = step_wait_s_,
            .resident_bytes = cache_->file_bytes()};
  }

 private:
  using Access = offload::RecordCache::Access;
  using Release = offload::RecordCache::Release;
  // Elements of the initial master or a load filled (and split or encoded) at a time.
  static constexpr int64_t kConvertPiece = int64_t{1} << 22;

  // The dtype of part s of a record (RecordPart s): 0 the fp32 master (compact: the int16 residual),
  // 1 exp_avg, 2 exp_avg_sq (the state dtype; 8-bit: int8 and uint8 codes), 3 and 4 their fp32 block
  // scales (8-bit only, else empty).
  at::ScalarType part_dtype(int s) const {
    switch (s) {
      case 0: return setup_.compact.compact_master ? at::kShort : at::kFloat;
      case 1: return setup_.state_dtype;
      case 2: return setup_.state_dtype == at::kChar ? at::kByte : setup_.state_dtype;
      default: return at::kFloat;
    }
  }
  // The dtype state s is checkpointed (and materialised) in.
  at::ScalarType checkpoint_dtype(int s) const {
    return s == 0 ? at::kFloat : checkpoint_moment_dtype(setup_.state_dtype);
  }
  bool converts(int s) const { return s == 0 ? setup_.compact.compact_master : setup_.compact.moments_8bit; }
  uint64_t record_bytes(int64_t count) const { return static_cast<uint64_t>(layout_.record_bytes(count)); }
  // Byte offset of part s (RecordPart) in a record of `count` elements.
  uint64_t part_offset(int s, int64_t count) const {
    return static_cast<uint64_t>(layout_.part_offset(static_cast<RecordPart>(s), count));
  }
  // Part s of the record of `count` elements held in `record` (bytes from the record's start), as a
  // typed view of it.
  at::Tensor record_part(const at::Tensor& record, int s, int64_t count) const {
    const auto begin = static_cast<int64_t>(part_offset(s, count));
    return record.narrow(0, begin, static_cast<int64_t>(part_offset(s + 1, count)) - begin).view(part_dtype(s));
  }
  int64_t count_of(int64_t k) const { return std::min(slot_numel_, numel_ - k * slot_numel_); }
  // The traffic counted from here on is a step's.
  void mark_traffic() {
    step_read_bytes_ = 0;
    read_mark_ = cache_->read_bytes();
    written_mark_ = cache_->written_bytes();
  }
  // Where sub-group k's state s lives in its record `record` (the bytes from the record's start).
  StateHome home(const at::Tensor& record, int64_t k, int s) const {
    const int64_t count = count_of(k);
    const CompactState& compact = setup_.compact;
    return {.s = s,
            .converted = converts(s),
            .part = record_part(record, s, count),
            .scales = s > 0 && converts(s) ? record_part(record, s + 2, count) : at::Tensor(),
            .hi = compact.compact_master ? compact.hi.narrow(0, k * slot_numel_, count) : at::Tensor()};
  }

  // A load: every record replaced by `fill` (a state() copy and what the buffers kept dropped
  // first), then the step count by `step`. A failed fill leaves no record half written in a buffer.
  Status replace_records(const std::function<Status()>& fill, int64_t step) {
    try {
      state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
      materialised_ = false;
      cache_->discard();
      Status status = fill();
      throw_if_error(cache_->wait_writes());
      mark_traffic();  // a step's traffic, not the load's
      if (status.ok()) {
        state_.step = step;
      } else {  // a record filled in part is in a buffer, not in its file
        cache_->discard();
      }
      return status;
    } catch (const Error& e) {
      cache_->discard();
      return e.status();
    }
  }

  // The first write: master weights from load_master, zero moments: an fp32 master loaded into the
  // record whole, a compact one kConvertPiece elements at a time through a scratch, split.
  void write_initial_state() {
    const bool compact = setup_.compact.compact_master;
    at::Tensor scratch = compact ? at::empty({std::min(slot_numel_, kConvertPiece)}, at::kFloat) : at::Tensor();
    for (int64_t k = 0; k < groups_; ++k) {
      const at::Tensor record = byte_tensor(value_or_throw(cache_->acquire(k, Access::kOverwrite)));
      record.zero_();
      const int64_t count = count_of(k);
      const int64_t piece = compact ? kConvertPiece : count;
      for (int64_t begin = 0; begin < count; begin += piece) {
        const int64_t n = std::min(piece, count - begin);
        const at::Tensor master =
            compact ? scratch.narrow(0, 0, n).zero_() : record_part(record, 0, count).narrow(0, begin, n);
        setup_.load_master(k * slot_numel_ + begin, master);
        if (compact) write_state(home(record, k, 0), begin, bytes_of(master));
      }
      throw_if_error(cache_->release(k, Release::kWrite));
    }
    throw_if_error(cache_->wait_writes());
  }

  // After state(): the (possibly changed) whole tensors go back to NVMe and are freed.
  void write_back_materialised() {
    if (!materialised_) return;
    const at::Tensor* states[] = {&state_.master, &state_.exp_avg, &state_.exp_avg_sq};
    for (int64_t k = 0; k < groups_; ++k) {
      const at::Tensor record = byte_tensor(value_or_throw(cache_->acquire(k, Access::kOverwrite)));
      const int64_t count = count_of(k);
      for (int s = 0; s < 3; ++s) {
        const at::Tensor in = states[s]->narrow(0, k * slot_numel_, count);
        write_state(home(record, k, s), 0, bytes_of(in));
      }
      throw_if_error(cache_->release(k, Release::kWrite));
    }
    throw_if_error(cache_->wait_writes());
    state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
    materialised_ = false;
  }

  RecordAdamSetup setup_;
  state_layout::Layout layout_;
  int64_t numel_ = 0;  // this rank's partition
  OffloadedStep step_;
  int64_t slot_numel_ = 0;  // elements of a full sub-group
  int64_t groups_ = 0;
  int64_t in_memory_ = 0;                        // records living in setup_.memory_records (cache_ places them)
  std::unique_ptr<offload::RecordCache> cache_;  // the records (setup_.buffers and memory_records outlive it)
  std::span<std::byte> held_;                    // the record a compact checkpoint holds (StoredRecords)
  AdamPartitionState state_;                     // step always; the tensors only while materialised_
  bool materialised_ = false;
  std::vector<int64_t> pass_;          // the streamed records of the step running, in order
  std::vector<int64_t> order_;         // the record of each piece of the step running, in order
  std::vector<size_t> pass_position_;  // order_[i]'s place in pass_ (a record in memory: the next's)
  bool again_ = false;                 // pass_ runs inside the backward: the next step's is the same
  uint64_t step_read_bytes_ = 0;       // read by the last step and the state() before it
  double step_wait_s_ = 0;             // the last step blocked on the disk
  uint64_t read_mark_ = 0;             // the cache's counters where the step's traffic starts
  uint64_t written_mark_ = 0;
};

}  // namespace

std::unique_ptr<PartitionOptimizer> make_record_adam(RecordAdamSetup setup) {
  return std::make_unique<CachedRecordAdam>(std::move(setup));
}

}  // namespace tierzero::engine
