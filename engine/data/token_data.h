// Training data: token files and JSONL, packed into fixed-length samples, shuffled
// deterministically per epoch, split across ranks, and iterated in micro-batches that resume
// exactly from a saved position.
//
// Token file (flat stream of token ids, little-endian):
//   - with a header ("TZTOKENS" files, any extension), 32 bytes:
//       0  char[8]  magic "TZTOKENS"
//       8  uint32   version: 1, or 2 (what `tierzero data prepare` writes when some tokens
//                   carry no loss, text/internal/dataset.h)
//       12 uint32   bytes per token: 2 (uint16) or 4 (uint32)
//       16 uint64   token count
//       24 uint64   version 1: reserved, 0; version 2: flags, bit 0 = a loss mask follows
//       32          the tokens; then, with flag bit 0, ceil(count / 8) bytes of loss mask: bit
//                   (i % 8) of byte i / 8 is 1 when token i is a training target. The file is
//                   exactly that long. A target whose mask bit is 0 becomes -100.
//   - headerless: the dtype comes from the caller, else from the extension: .u16 / .uint16 ->
//     uint16, .u32 / .uint32 -> uint32 (.bin needs the dtype given). The size must be a multiple
//     of the token width.
//   Sample i holds tokens [i * seq_len, i * seq_len + seq_len + 1): inputs are the first seq_len,
//   targets the last seq_len (next-token prediction); consecutive samples share one boundary
//   token. A stream of n tokens gives (n - 1) / seq_len samples.
//
// JSONL of text (extension .jsonl, rows {"text": ...}, {"prompt": ..., "completion": ...} or chat
//   {"messages": [...]}): tokenized with the model's tokenizer when opened (text/internal/dataset.h:
//   EOS after each text row, the prompt's tokens carry no loss; a chat, or a prompt-completion row
//   given as messages, is rendered with the model's chat template and only its assistant turns,
//   or its completion, carry loss, text/internal/chat_rows.h), then packed as a token file's stream.
//
// JSONL of ids (extension .jsonl): one object per line, {"input_ids": [ints]} plus optionally
//   "labels" (Hugging Face convention: same length as input_ids, unshifted, -100 = not trained)
//   or "loss_mask" (same length, 0/1: whether token t is a training target). Position t of a
//   sample feeds input_ids[t] and targets the next token (t + 1): labels[t + 1], or
//   input_ids[t + 1] when loss_mask[t + 1] == 1 (or no mask), else -100. Rows shorter than
//   seq_len + 1 are padded (input 0, target -100); longer rows are an error naming the line.
//   Blank lines are skipped.
//
// Order: for epoch e the sample indices 0..N-1 are permuted by Fisher-Yates (for i = N-1 down
// to 1: swap p[i] with p[j], j uniform in [0, i]) driven by splitmix64 seeded with
// seed ^ (0x9E3779B97F4A7C15 * (e + 1)) (mod 2^64); j = r mod (i + 1) for the first draw r that
// is >= 2^64 mod (i + 1) (rejection, so no modulo bias). See epoch_permutation(). Rank r
// of W takes permutation positions r, r + W, r + 2W, ... below (N / W) * W, so ranks are
// disjoint and equal in size; the N mod W samples at the end of each epoch's permutation are not
// used in that epoch (a different set each epoch). Micro-batches are consecutive runs of
// micro_batch_size samples of a rank's sequence; a tail shorter than a micro-batch is skipped
// and the next epoch begins.
//
// Held-out split (split_held_out, `train --eval-fraction f`): of a source's N samples, k =
// ceil(f * N) (at least 1, at most N - 1) are held out for evaluation: the samples at the first k
// positions of epoch_permutation(N, seed, kHeldOutDraw), a draw no training epoch makes. Training
// then sees only the other N - k samples (a source of its own, in ascending sample order, which
// the epochs above permute), the evaluation only those k, in ascending order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::engine {

inline constexpr int64_t kIgnoreIndex = -100;  // target value that takes no loss

enum class TokenDtype : uint8_t { kUint16, kUint32 };
// Parses "uint16"/"u16" or "uint32"/"u32"; kInvalidArgument otherwise.
Result<TokenDtype> parse_token_dtype(std::string_view name);

// Writes `tokens` as a TZTOKENS file (header above) of `dtype`; kInvalidArgument when a token
// does not fit the dtype, kIo naming the path when the write fails.
Status write_token_file(const std::string& path, std::span<const uint32_t> tokens, TokenDtype dtype);

// Fixed-length samples, random access.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;     // number of samples
  virtual int64_t seq_len() const = 0;  // positions per sample
  // Fills seq_len() input ids and targets (kIgnoreIndex where masked) of sample `index`
  // (0 <= index < size(), else kInvalidArgument).
  virtual Status read(int64_t index, int64_t* input_ids, int64_t* targets) const = 0;
};

// Opens a token file (format above), mapped read-only. `dtype` is required for headerless files
// whose extension does not say it, and must agree with a header. Errors name the path.
Result<std::shared_ptr<const SampleSource>> open_token_file(const std::string& path, int64_t seq_len,
                                                            std::optional<TokenDtype> dtype = {});
// Reads a JSONL file (format above) into memory. Errors name the path and line.
Result<std::shared_ptr<const SampleSource>> open_jsonl(const std::string& path, int64_t seq_len);
// Reads a JSONL file of text rows (format above), tokenized on every core with the tokenizer (and
// chat template) of `tokenizer_dir` (a Hugging Face model directory). Errors name the path and line.
Result<std::shared_ptr<const SampleSource>> open_text_jsonl(const std::string& path, int64_t seq_len,
                                                            const std::string& tokenizer_dir);
// For ".jsonl": open_text_jsonl() when its first row holds "text", "prompt" or "messages" (kInvalidArgument
// naming the fix when `tokenizer_dir` is empty), else open_jsonl(); open_token_file() otherwise.
Result<std::shared_ptr<const SampleSource>> open_samples(const std::string& path, int64_t seq_len,
                                                         std::optional<TokenDtype> dtype = {},
                                                         const std::string& tokenizer_dir = "");

// The permutation of 0..n-1 used for `epoch` (header comment). Same inputs, same output, on
// every platform and library.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, uint64_t epoch);

// The epoch number whose permutation chooses the held-out samples (2^64 - 1: no training epoch).
inline constexpr uint64_t kHeldOutDraw = ~uint64_t{0};

// A source split into the samples training reads and those held out for evaluation.
struct HeldOutSplit {
  std::shared_ptr<const SampleSource> train;     // N - k samples, ascending sample order
  std::shared_ptr<const SampleSource> held_out;  // k samples, ascending sample order
};
// Splits `source` as the header comment says. kInvalidArgument naming `what` (the data file) when
// `fraction` is not in (0, 1) or the source has fewer than 2 samples or the split would leave
// no sample for training.
Result<HeldOutSplit> split_held_out(std::shared_ptr<const SampleSource> source, double fraction, uint64_t seed,
                                    const std::string& what);

// micro_batch_size samples, row-major [micro_batch_size, seq_len].
struct MicroBatch {
  int64_t batch_size = 0;
  int64_t seq_len = 0;
  std::vector<int64_t> input_ids;
  std::vector<int64_t> targets;
  std::vector<int64_t> sample_indices;  // which samples of the source, in row order
};

struct ShardSpec {
  uint64_t seed = 1234;
  int rank = 0;
  int world_size = 1;
  int64_t micro_batch_size = 1;
};

// Where a rank is: `index` samples of its share of `epoch` are consumed.
struct DataPosition {
  int64_t epoch = 0;
  int64_t index = 0;
};

// One rank's endless micro-batch stream over a source.
class MicroBatchIterator {
 public:
  // kInvalidArgument when rank/world_size/micro_batch_size are out of range or the rank's share
  // of an epoch (size() / world_size samples) is smaller than one micro-batch.
  static Result<MicroBatchIterator> create(std::shared_ptr<const SampleSource> source, const ShardSpec& spec);

  // Returns the next micro-batch, moving to the next epoch when this one has no full
  // micro-batch left. Errors come from the source.
  Result<MicroBatch> next();

  const DataPosition& position() const { return position_; }
  // Samples this rank reads per epoch (before the short tail is skipped).
  int64_t samples_per_epoch() const { return samples_per_rank_; }
  // Micro-batches this rank yields per epoch.
  int64_t micro_batches_per_epoch() const { return samples_per_rank_ / spec_.micro_batch_size; }
  int64_t micro_batch_size() const { return spec_.micro_batch_size; }

  // {"epoch", "index", "seed", "rank", "world_size", "micro_batch_size", "num_samples"}.
  nlohmann::json state() const;
  // Restores state(). kInvalidArgument naming the key when a field is missing, or when seed,
  // world_size, micro_batch_size or num_samples differ from this iterator's (resuming on other
  // data or another layout would not continue the same order).
  Status load_state(const nlohmann::json& state);

 private:
  MicroBatchIterator(std::shared_ptr<const SampleSource> source, const ShardSpec& spec);
  // Position p of this rank's sequence in the current epoch -> sample index.
  int64_t sample_at(int64_t p);
  std::shared_ptr<const SampleSource> source_;
  ShardSpec spec_;
  int64_t samples_per_rank_ = 0;
  DataPosition position_;
  int64_t permutation_epoch_ = -1;  // the epoch `permutation_` was computed for
  std::vector<int64_t> permutation_;
};

struct DsConfig;

// The training data a ds_config names (tierzero.data: path, seq_len, dtype, seed), read by
// `rank` of config.batch.world_size in micro-batches of train_micro_batch_size_per_gpu.
// A relative path is taken from `base_dir` when it is not empty, else from the working
// directory. kInvalidArgument when tierzero.data.path is unset; otherwise the errors of
// open_samples() and MicroBatchIterator::create().
Result<MicroBatchIterator> open_training_data(const DsConfig& config, int rank, const std::string& base_dir = "");

}  // namespace tierzero::engine
