// tierzero engine checkpoints: save a ZeRO training state sharded over ranks, load it back at the
// same or another world size, verify it, and read it for consolidation.
//
// On disk:
//   DIR/latest                 the tag of the newest complete checkpoint (text, no newline)
//   DIR/TAG/manifest.json      layout, training state and a size + XXH3-64 per file (see below)
//   DIR/TAG/rank_00000.bin     rank 0's sections, back to back (one per group state part, or per
//   DIR/TAG/rank_00001.bin     piece of one: RankData::piece_elements; raw or one zstd frame
//                              each), then rank 0 only: the replicated tensors
//   DIR/TAG/rank_00000.json    each rank's record (sections, checksums); folded into the manifest
// The commit protocol (checkpoint/storage/commit_transaction.cpp; its use here:
// engine_checkpoint_writer.cpp) makes a crash at any step leave the previous checkpoint loadable.
// Files are written through fs::default_file_system().
//
// Partitioning, per flat group (the parameters of one optimizer group concatenated in order, no
// padding between them: the "logical" flat of T elements):
//   stage 0     every rank's partition is the whole flat; only rank 0 stores it
//   stage 1, 2  the flat is zero-padded to a multiple of alignment * W elements and split evenly
//               (DeepSpeed: alignment 2); rank r holds padded elements [r*P, (r+1)*P)
//   stage 3     each parameter of n elements is split into ceil(n/W)-element pieces, the last one
//               zero-padded; rank r holds piece r of every parameter, concatenated in order
// Every state of a group (fp32 master, exp_avg, exp_avg_sq, ...) is partitioned the same way.
// By convention states[0] is the fp32 master copy of the parameters (what consolidation reads).
//
// Encoded states (format_version 3): a state may be stored in the optimizer's compact layout as
// two sections ("parts", state_parts()) instead of one: the fp32 master as its bf16 high half (the
// 16-bit weights themselves) + an int16 residual (kCompactMaster), an Adam moment as 8-bit codes +
// one fp32 scale per kStateBlock elements of the rank's partition (kBlockwise8). Readers give such
// a state either as stored (read_stored: the parts' bytes, at the saved world size) or
// decoded to fp32 (read_partition / read_flat_range, at any world size). docs/formats.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/dtype.h"
#include "common/common.h"

namespace tierzero::checkpoint {

class WriteBuffers;  // checkpoint/storage/storage.h

// ---- Layout ---------------------------------------------------------------------------------

// How a state's partition is stored.
//   kRaw           one section of `dtype` elements.
//   kCompactMaster the fp32 master as part "hi" (BF16: the bits rounded to nearest, ties away
//                  from zero — the bf16 weights) and part "residual" (I16); the fp32 value is
//                  cpu_adam::join_master(hi, residual), bit for bit the master split_master split.
//   kBlockwise8    an Adam moment as part "codes" (I8: exp_avg's sign-magnitude E4M3 code, U8:
//                  exp_avg_sq's E5M3 code; cpu_adam/adam.h, kMomentBlock) and part "scales" (F32,
//                  one per kStateBlock elements of the rank's partition, blocks starting at
//                  partition element 0, the last one possibly short); value = decode(code) * scale.
// An encoded state's dtype is kF32: what decoding gives.
enum class StateCodec : uint8_t { kRaw, kCompactMaster, kBlockwise8 };
// Elements per kBlockwise8 scale (cpu_adam::kMomentBlock).
inline constexpr uint64_t kStateBlock = 256;

struct StateSpec {
  std::string name;                       // "fp32", "exp_avg", "exp_avg_sq", ...
  ElementType dtype = ElementType::kF32;  // F32, BF16 or F16 (kRaw); F32 (encoded)
  StateCodec codec = StateCodec::kRaw;
  ElementType codes = ElementType::kI8;  // kBlockwise8: the codes' type, I8 (exp_avg) or U8 (exp_avg_sq)
};

// One stored section of a state: a part of its encoding.
struct StatePart {
  std::string_view name;    // "" (kRaw), "hi", "residual", "codes", "scales"
  ElementType dtype;        // of the stored elements
  bool per_block = false;   // one element per kStateBlock partition elements, rounded up (scales)
};
// The parts of `state`, in the order its sections are stored.
std::vector<StatePart> state_parts(const StateSpec& state);
// Elements of `part` in a partition of `partition_numel` elements.
uint64_t part_numel(const StatePart& part, uint64_t partition_numel);
// The parts of encoded `state` for one rank's partition given as fp32 values (padding included), by
// cpu_adam's split_master / encode_moment_blocks: what a writer stores for it. The master splits
// exactly; 8-bit moments are re-encoded (from values decoded at another partitioning, not the codes
// a save stored). kInvalidArgument for a kRaw state.
Result<std::vector<std::vector<std::byte>>> encode_partition(const StateSpec& state, std::span<const float> values);

struct FlatGroup {
  std::vector<TensorSpec> params;  // flat order
  std::vector<StateSpec> states;   // states[0]: the fp32 master parameters
  // Sum of the parameters' numel: the logical (unpadded) flat length.
  uint64_t numel() const;
};

// A tensor every rank holds whole (module buffers, frozen parameters); rank 0 stores it.
struct ReplicatedTensor {
  TensorSpec spec;
  ElementType dtype = ElementType::kF32;
};

struct CheckpointManifest {
  int zero_stage = 0;       // 0..3
  uint32_t world_size = 1;  // data-parallel ranks that saved it
  uint32_t alignment =
      partitioning::kDeepSpeedAlignment;  // stages 1-2: flat padded to a multiple of alignment * world_size
  int64_t step = 0;                       // optimizer steps taken
  std::vector<FlatGroup> groups;
  std::vector<ReplicatedTensor> replicated;
  std::vector<std::pair<std::string, std::string>> aliases;  // tied weights: alias -> source
  // Opaque training state, kept verbatim (null when absent).
  nlohmann::json loss_scaler;
  nlohmann::json lr_scheduler;
  nlohmann::json data_position;
  std::string model_config_json;  // the model's HF config.json text, or empty
};

// One contiguous run of a rank's partition: logical flat elements [logical_begin, +length) sit at
// partition elements [partition_begin, +length). Elements of the partition not covered are padding.
struct PartitionSegment {
  uint64_t logical_begin = 0;
  uint64_t partition_begin = 0;
  uint64_t length = 0;
};

// Elements in each rank's partition of `group` for `zero_stage` at `world_size` (padding included),
// by common/internal/partition.h's arithmetic (which the engine's buffers use too).
uint64_t partition_numel(const FlatGroup& group, int zero_stage, uint32_t world_size, uint32_t alignment);
// The segments of rank `rank`'s partition, in increasing logical (and partition) order.
std::vector<PartitionSegment> partition_segments(const FlatGroup& group, int zero_stage, uint32_t world_size,
                                                 uint32_t alignment, uint32_t rank);
// Whether `rank` stores group partitions in its file (stage 0: only rank 0).
bool rank_stores_groups(int zero_stage, uint32_t rank);

// Checks a manifest before it is saved or after it is read: stage 0..3, world size >= 1, alignment
// >= 1, shapes non-negative, states F32/BF16/F16 (encoded: F32, codes I8/U8) with a first state,
// names unique, aliases point at saved tensors. Errors name the field.
Status validate_manifest(const CheckpointManifest& manifest);

// ---- Saving ---------------------------------------------------------------------------------

struct CheckpointOptions {
  // 0: sections stored raw; 1..22: one zstd frame per section of a kind that pays (kRaw states,
  // replicated tensors, encoded states' "hi" and "codes" parts; never "residual" or "scales":
  // docs/formats.md gives the measured ratios).
  int compression_level = 0;
  uint32_t compression_threads = 0;  // zstd worker threads (0: compress on the calling thread)
  // The rank file's staging buffers, borrowed (storage.h): their count is how far the state's reads
  // run ahead of the disk. nullptr: the stream's own 4 of 16 MiB. Used by one save at a time.
  const WriteBuffers* write_buffers = nullptr;
};

// The bytes of one section produced in order instead of held whole: each call fills `out` with the
// section's next out.size() bytes; the writer calls it until the section's size is reached (pieces
// of at most a few MiB). An error stops the save and is returned by write_checkpoint_rank.
using SectionFill = std::function<Status(std::span<std::byte> out)>;

// What one rank saves.
struct RankData {
  // group_states[g][k]: this rank's k-th section of groups[g]: the states in order, each state's
  // parts (state_parts()) in order — one section per kRaw state, two per encoded one. Each holds
  // part_numel(part, partition_numel(...)) elements of the part's dtype. Empty for ranks that store
  // no groups.
  std::vector<std::vector<std::span<const std::byte>>> group_states;
  // Instead of group_states (then empty): group_state_fills[g][k] streams the same bytes piece by
  // piece, so a state that is not in memory (an optimizer on NVMe) is saved without a whole copy.
  // The file is the same byte for byte.
  std::vector<std::vector<SectionFill>> group_state_fills;
  // 0: each section is stored whole, one after the other. > 0 (format_version 3): each is cut into
  // pieces of piece_elements partition elements (the last one shorter; scales: their blocks'),
  // stored piece-major — piece 0 of every section of group 0, then piece 1, ..., then group 1 — so
  // an optimizer whose records hold piece_elements elements of every state (its sub-groups) is
  // saved record by record, each read once (the fills are called in that order). A multiple of
  // kStateBlock with a kBlockwise8 state. Readers see the same partitions either way.
  uint64_t piece_elements = 0;
  // Rank 0 only: each replicated tensor's bytes, in manifest order.
  std::vector<std::span<const std::byte>> replicated;
  // Opaque per-rank state (RNG, data loader position), returned verbatim by rank_state().
  nlohmann::json rank_state;
};

// Rank 0, before any rank writes: checks `manifest`, refuses the tag DIR/latest names (the
// published checkpoint is immutable) and prepares a clean staging directory DIR/TAG.partial. An
// unpublished DIR/TAG (left by a crash before `latest` moved) is replaced at commit.
Status begin_checkpoint(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                        const CheckpointOptions& options = {});
// Every rank, after begin_checkpoint (a barrier): writes and fsyncs DIR/TAG.partial/rank_R.bin and
// its record. `data` must match the manifest's layout (kInvalidArgument naming group/state/rank).
Status write_checkpoint_rank(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                             uint32_t rank, const RankData& data, const CheckpointOptions& options = {});
// Rank 0, after every rank's write succeeded (a barrier): checks every rank record, writes the
// manifest, publishes DIR/TAG and points DIR/latest at it. The checkpoint is durable on return.
Status commit_checkpoint(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                         const CheckpointOptions& options = {});
// All three for a single process holding every rank's data (ranks.size() == world_size).
Status save_checkpoint(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                       std::span<const RankData> ranks, const CheckpointOptions& options = {});

// ---- Loading --------------------------------------------------------------------------------

class CheckpointReader {
 public:
  // Opens checkpoint `tag` under `dir` (empty tag: the one named by DIR/latest) and validates its
  // manifest. Rank files are opened on first use.
  static Result<std::unique_ptr<CheckpointReader>> open(const std::string& dir, const std::string& tag = "");
  virtual ~CheckpointReader() = default;

  virtual const CheckpointManifest& manifest() const = 0;
  virtual const std::string& tag() const = 0;
  // DIR/TAG.
  virtual const std::string& path() const = 0;

  // read_partition and read_flat_range decode: an encoded state is given as its fp32 values
  // (compact master: join(hi, residual), bit for bit; 8-bit moments: decode(code) * scale, and
  // re-encoding those at another partitioning does not give the stored codes back).
  // Fills `out` with rank `rank`'s partition of groups[group].states[state] for `world_size` ranks
  // (any world size: resharding), padding zeroed. out.size() must be partition_numel(...) times
  // the state's item size. Every source section touched is read to its end and its checksum checked.
  virtual Status read_partition(size_t group, size_t state, uint32_t world_size, uint32_t rank,
                                std::span<std::byte> out) = 0;
  // Fills `out` with logical flat elements [begin, begin + out.size() / itemsize) of a group state.
  // Sequential calls stream; checksums are checked when a section is read to its end.
  virtual Status read_flat_range(size_t group, size_t state, uint64_t begin, std::span<std::byte> out) = 0;
  // Reads every section read_flat_range touched to its end, checking its checksum, and closes
  // those streams. Call after the last read_flat_range of a pass.
  virtual Status finish_reads() = 0;
  // As stored (what a resume at the saved world size loads: bit for bit the bytes written): fills
  // `out` with bytes [offset, offset + out.size()) of part `part` (state_parts()) of rank `rank`'s
  // partition of a group state, at the saved world size. Sequential calls stream (a part too large
  // for memory, or going to NVMe records, is read piece by piece); a section's checksum is checked
  // when it is read to its end, the rest at finish_reads(). (A reader of another format holds
  // kRaw states only: its part 0 is the partition read_partition gives at the saved world size.)
  virtual Status read_stored(size_t group, size_t state, size_t part, uint32_t rank, uint64_t offset,
                             std::span<std::byte> out);
  // The whole part at once (out.size() its bytes), then finish_reads().
  Status read_stored_partition(size_t group, size_t state, size_t part, uint32_t rank, std::span<std::byte> out);
  // Fills `out` with bytes [begin, begin + out.size()) of replicated tensor `index`. Reading
  // forward streams; the tensor's checksum is checked when a read reaches its end.
  virtual Status read_replicated(size_t index, uint64_t begin, std::span<std::byte> out) = 0;
  // The opaque state rank `rank` saved (null when it saved none).
  virtual const nlohmann::json& rank_state(uint32_t rank) const = 0;
};

// Finishes a move of DIR/latest that a crash stopped halfway: when DIR/latest.xxh3 names a tag
// and DIR/latest still holds the tag before it, DIR/latest is moved to that tag (durably, by the
// commit protocol's pointer step). No change when the two agree or DIR has no latest.xxh3. Errors
// as CheckpointReader::open's when the pair is damaged, else name the file.
Status complete_latest(const std::string& dir);

// What verify_checkpoint found.
struct VerifyReport {
  std::string path;  // DIR/TAG
  uint32_t files_checked = 0;
  uint64_t bytes_checked = 0;
};
// Reads every rank file of checkpoint `tag` (empty: latest) whole and checks its size and XXH3
// against the manifest, then decodes every section. The first problem is the error; it names the
// file (and rank and section) and what to do.
Result<VerifyReport> verify_checkpoint(const std::string& dir, const std::string& tag = "");

// ---- Consolidation ------------------------------------------------------------------------------

// True when `dir` holds a tierzero checkpoint: DIR/TAG/manifest.json for `tag`, or for the tag in
// DIR/latest when `tag` is empty, or a manifest.json directly in `dir` — or a DIR/latest.xxh3 that
// does not agree with DIR/latest (the reader's error then names the damage).
bool is_engine_checkpoint(const std::string& dir, const std::string& tag = "");
// The checkpoint as whole fp32 tensors: replicated tensors first, then every group's parameters
// (from states[0]), aliases as saved. The model config is the manifest's, else DIR/config.json
// (Hugging Face Trainer's layout), else none.
Result<std::unique_ptr<ConsolidationSource>> open_engine_checkpoint_source(const std::string& dir,
                                                                           const std::string& tag = "");

}  // namespace tierzero::checkpoint
