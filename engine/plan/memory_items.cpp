// One rank's memory, item by item, as engine/zero and engine/model hold it (plan.h lists the rules).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <thread>

#include "engine/plan/internal/model_params.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine::plan {
namespace {

using offload::PinnedBufferSpec;
using offload::PinnedRole;

constexpr uint64_t kCudaContextBytes = 500'000'000;  // CUDA context and kernels, outside the allocator
// LibTorch, CUDA's host side, the process itself: every GPU-box run's resident unpinned memory after
// its steps was 0.95-1.07 GiB (benchmarks/results/round3_device, round4_device: 1.35B to 14B).
constexpr uint64_t kHostRuntimeBytes = 1ull << 30;
constexpr double kStreamPieceBytes = 64 << 20;       // param_loading.cpp's fp32 piece: 16 Mi elements
constexpr double kReadBufferBytes = 2 << 20;         // param_source.cpp's kPieceBytes, one a reading thread
constexpr int kLiveReduceBuckets = 3;                // the open bucket and two launched ones

uint64_t u(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(v); }

class Items {
 public:
  void add(Tier tier, std::string what, Phase phase, double bytes, std::string formula) {
    if (bytes >= 1) items_.push_back({tier, std::move(what), phase, u(bytes), std::move(formula)});
  }
  // `count` elements of `bytes_each` bytes: formula "B B x N".
  void elements(Tier tier, std::string what, Phase phase, int bytes_each, double count, std::string why = "") {
    add(tier, std::move(what), phase, static_cast<double>(bytes_each) * count,
        std::to_string(bytes_each) + " B x " + count_text(count) + (why.empty() ? "" : " " + why));
  }
  std::vector<MemoryItem> take() { return std::move(items_); }

 private:
  std::vector<MemoryItem> items_;
};

// Bytes a decoder layer holds per token. `recomputed`: while its recomputation's backward runs, the
// saved intermediates (two RMSNorms' fp32 input and 16-bit output; q, k before and after RoPE and
// its rotated half; v; attention's output and its reshaped copy; the residual; gate, silu, up and
// their product; the output) and the gradients in flight (the output's, the MLP's widest pair, the
// norms' fp32 ones). `kept`: its graph from its forward to its backward when the window keeps it
// (tierzero.kept_activations): what autograd saves, nothing in flight. Each RMSNorm its input and its
// output (fused on a GPU in 16 bits: e bytes each and a 4-byte inverse RMS; else the fp32 input), q,
// k, v after RoPE and attention's output with its fp32 log-sum-exp per head, the MLP's gate, silu, up
// and their product. On the H100 a Llama-1.35B layer's 24 graphs held 2.28 GiB each at 32,768 tokens
// with their weights; this counts 2.44 GiB (benchmarks/RESULTS.md, 2026-12-06, session 10). Both:
// Gemma's two extra norms and the q/k norms' inputs count too; Gemma 2's eager attention keeps its
// [heads, seq_len] scores per token (scores, capped, masked in e bytes; the softmax in fp32 and cast
// back).
struct LayerBytes {
  double recomputed = 0;
  double kept = 0;
};
LayerBytes layer_bytes_per_token(const ModelDims& m, int e, int64_t seq_len, bool fused_norm) {
  const double h = static_cast<double>(m.hidden_size), i = static_cast<double>(m.intermediate_size);
  const double q = static_cast<double>(m.num_attention_heads * m.head_dim);
  const double kv = static_cast<double>(m.num_key_value_heads * m.head_dim);
  const double heads = static_cast<double>(m.num_attention_heads);
  const double norms = m.sandwich_norms ? 4 : 2;
  double specific = 0;  // the q/k norms' inputs and eager attention's scores (the models that have them)
  if (m.qk_norm) specific += (4 + e) * (q + kv);
  if (m.eager_attention) specific += heads * static_cast<double>(seq_len) * (4 * e + 4);
  const double saved = norms * (4 + e) * h + e * (5 * q + 4 * kv) + 4 * e * i + 2 * e * h + specific;
  const double in_flight = e * (h + 2 * i) + 8 * h;
  return {.recomputed = saved + in_flight,
          .kept = norms * (fused_norm ? 2 * e * h + 4 : (4 + e) * h) + e * (2 * q + 2 * kv) + 4 * heads + 4 * e * i +
                  specific};
}

// The parameters' copies outside the pinned list (host_buffers lists the pinned ones and the swap files).
void parameters(Items& out, const RunShape& s, const ZeroConfig& zero) {
  const int e = s.compute_bytes;
  if (zero.stage < 3) {
    out.elements(Tier::kGpu, "parameters (compute copy, whole model)", Phase::kResident, e, s.padded);
    return;
  }
  if (!s.params_nvme && !s.params_pinned)
    out.elements(s.params_offloaded() ? Tier::kPageable : Tier::kGpu, "parameter shard", Phase::kResident, e,
                 s.partition);
  out.elements(Tier::kGpu, "persistent small parameters, whole", Phase::kResident, e, s.persistent,
               "(<= stage3_param_persistence_threshold)");
  const double in_use = std::min<double>(s.nonpersistent, s.largest_unit + zero.prefetch_bucket_size);
  const double live = std::max<double>(
      std::min<double>({static_cast<double>(s.nonpersistent), static_cast<double>(zero.max_live_parameters),
                        static_cast<double>(s.kept_gathered) + in_use}),
      std::min<double>(s.largest_unit, s.nonpersistent));
  out.elements(Tier::kGpu, "gathered parameters", Phase::kBackward, e, live,
               "(min(stage3_max_live_parameters, kept for reuse + unit + prefetch))");
  if (s.world > 1)  // one rank's copies land in the gathered parameters themselves
    out.elements(Tier::kGpu, "all-gather buffers", Phase::kBackward, e, in_use * (1.0 + 1.0 / s.world),
                 "(unit + stage3_prefetch_bucket_size, x (1 + 1/W))");
}

// tierzero.lora's frozen base (functional_model.h, LoRA): every weight once in the compute dtype, on the GPU or,
// with offload_param "cpu", in host memory (pinned: in a pool of its own, host_buffers) with the unit in use and
// the next one (copied ahead on a side stream) on the GPU (frozen_prefetch.h); with "nvme" in swap files, read
// through two staging halves of the largest unit (frozen_disk.h; host_buffers).
void frozen_base(Items& out, const RunShape& s, const ZeroConfig& zero) {
  if (!s.lora) return;
  const bool offloaded = zero.offload_param.device != OffloadDevice::kNone;
  if (!s.frozen_nvme && !(offloaded && zero.offload_param.pin_memory))
    out.elements(offloaded ? Tier::kPageable : Tier::kGpu, "frozen base weights (tierzero.lora)", Phase::kResident,
                 s.compute_bytes, static_cast<double>(s.frozen_parameters), "(no gradients, no optimizer state)");
  if (offloaded)
    out.elements(Tier::kGpu, "frozen base: the unit in use and the next, copied", Phase::kBackward, s.compute_bytes,
                 2.0 * static_cast<double>(s.frozen_largest_unit), "(2 x the largest unit)");
}

void gradients(Items& out, const RunShape& s, const ZeroConfig& zero) {
  if (!s.optimizer_offloaded)
    out.elements(Tier::kGpu, "gradient partition", Phase::kResident, s.grad_bytes, s.partition);
  if (s.world == 1 && zero.stage == 3) {
    // One rank hands each bucket on as it is launched, and a parameter larger than a bucket is its own
    // bucket without a copy (sharded_grad_reducer.h): one open bucket of the smaller ones.
    out.elements(Tier::kGpu, "reduce buckets", Phase::kBackward, s.grad_bytes,
                 std::min<double>(static_cast<double>(s.reduce_bucket), s.parameters),
                 "(the open bucket: one rank lands each bucket at once; a larger parameter's gradient is its bucket)");
  } else {
    const double bucket = std::max<double>(static_cast<double>(s.reduce_bucket), s.largest_param);
    out.elements(Tier::kGpu, "reduce buckets", Phase::kBackward, s.grad_bytes,
                 std::min<double>(kLiveReduceBuckets * bucket, s.parameters), "(3 x reduce_bucket_size)");
  }
  out.elements(Tier::kGpu, "one unit's parameter gradients", Phase::kBackward, s.compute_bytes, s.largest_unit);
}

// "optimizer state (fp32 master, m, v)", "(compact master, int8 m, v)", ...
std::string state_name(const RunShape& s) {
  const state_layout::Layout& l = s.layout;
  const char* moments = l.moments == state_layout::Moments::kFp32   ? "m, v"
                        : l.moments == state_layout::Moments::kBf16 ? "bf16 m, v"
                                                                    : "int8 m, v";
  return std::string("optimizer state (") + (l.compact_master ? "compact master" : "fp32 master") + ", " + moments +
         ")";
}

// "12 B" or "4 B + 4 B per 256" per element of the layout.
std::string per_element(const state_layout::Layout& l) {
  const int64_t whole = l.record_bytes(state_layout::kMomentBlock) / state_layout::kMomentBlock;
  const int64_t scales = l.record_bytes(state_layout::kMomentBlock) % state_layout::kMomentBlock;
  return std::to_string(whole) + " B" +
         (scales ? " + " + std::to_string(scales) + " B per " + std::to_string(state_layout::kMomentBlock) : "");
}

// The optimizer on the GPU (offloaded: host_buffers, and the GPU share's device slots, engine/layout's).
void optimizer(Items& out, const RunShape& s) {
  if (s.optimizer_offloaded) {
    const int64_t chunk = state_layout::gpu_share_chunk(s.records());
    out.add(Tier::kGpu, "optimizer GPU share: device slots", Phase::kResident,
            static_cast<double>(state_layout::gpu_share_device_bytes(s)),
            std::to_string(state_layout::kGpuShareQueues) + " x " +
                format_bytes(
                    static_cast<uint64_t>(state_layout::gpu_share_slot(s.layout, s.host_grad_bytes, chunk).bytes)) +
                " (tierzero.gpu_optimizer_share: a chunk of " + count_text(static_cast<double>(chunk)) +
                " elements' gradients, bf16 weights, state each)");
    return;
  }
  out.elements(Tier::kGpu, state_name(s), Phase::kResident, 12, s.partition);
  out.elements(Tier::kGpu, "optimizer step temporaries (fp32 gradient)", Phase::kStep, 4, s.partition);
}

// Bytes of the buffers of `roles` in `buffers`.
uint64_t bytes_of(const std::vector<PinnedBufferSpec>& buffers, std::initializer_list<PinnedRole> roles) {
  uint64_t bytes = 0;
  for (const PinnedBufferSpec& buffer : buffers)
    if (std::find(roles.begin(), roles.end(), buffer.role) != roles.end()) bytes += buffer.bytes;
  return bytes;
}

uint64_t listed_bytes(const std::vector<PinnedBufferSpec>& buffers) {
  uint64_t bytes = 0;
  for (const PinnedBufferSpec& buffer : buffers) bytes += buffer.bytes;
  return bytes;
}

// The pinned buffers and swap files of the offloaded step and of a LoRA run's frozen base, as
// engine/layout lists them for the engine (the same functions): the records the optimizer keeps in
// memory by tierzero.pinned_memory_limit (less the frozen base's pinned pool), each pool's alignment
// and page rounding, the swap files with each record's share of a path rounded to 4096 bytes.
void host_buffers(Items& out, RunShape& s, const DsConfig& config) {
  using namespace state_layout;
  const ZeroConfig& zero = config.zero;
  const int e = s.compute_bytes;
  std::vector<PinnedBufferSpec> frozen;  // the base's pool: its weights pinned, or its NVMe staging halves
  const FrozenDiskLayout disk = s.frozen_nvme ? frozen_disk_layout(s.frozen_unit_numels, e) : FrozenDiskLayout{};
  if (s.frozen_nvme) {
    frozen = frozen_staging_buffers(disk);
  } else if (s.lora && zero.offload_param.device != OffloadDevice::kNone && zero.offload_param.pin_memory) {
    frozen = frozen_pinned_buffers(s.frozen_param_numels, e);
  }
  const uint64_t frozen_pool = frozen.empty() ? 0 : offload::pinned_capacity(frozen);
  static_assert(kRecordsInMemoryByBudget == kOptimizerRecordsAuto, "records_in_memory carries \"auto\" as is");
  const int64_t requested = config.tierzero.optimizer_records_in_memory;
  s.records_in_memory =
      records_in_memory(s, requested, pool_limit_after(config.tierzero.pinned_memory_limit, frozen_pool));
  const int64_t kept = s.records_in_memory;
  const std::vector<PinnedBufferSpec> pinned = pinned_buffers(s, kept);
  const Records records = s.records();
  const std::string state = state_name(s);
  const auto pin = [&](const std::string& what, std::initializer_list<PinnedRole> roles, const std::string& formula) {
    out.add(Tier::kPinned, what, Phase::kResident, static_cast<double>(bytes_of(pinned, roles)), formula);
  };
  if (s.optimizer_offloaded) {
    if (s.optimizer_nvme) {
      const int64_t buffers = s.optimizer_buffers;
      pin("optimizer swap buffers", {PinnedRole::kOptimizerSwapBuffer},
          per_element(s.layout) + " x " + count_text(static_cast<double>(buffers * records.group())) +
              " (offload_optimizer.buffer_count x sub_group_size)");
      pin("optimizer records kept in memory", {PinnedRole::kOptimizerRecords},
          per_element(s.layout) + " x " + count_text(static_cast<double>(records.first_numel(kept))) +
              " (optimizer_records_in_memory: " + std::to_string(kept) + " of " + std::to_string(records.count()) +
              " records" + (requested < 0 ? ", by tierzero.pinned_memory_limit)" : ")"));
    } else {
      pin(state, {PinnedRole::kOptimizerRecords},
          per_element(s.layout) + " x " + count_text(static_cast<double>(s.partition)));
    }
    const std::string grads16 = s.host_grad_bytes == 2 ? " (bf16)" : " (fp32 accumulation)";
    if (s.grad_ring_records > 0) {
      pin("gradient ring" + grads16, {PinnedRole::kGradients},
          std::to_string(s.grad_ring_records) + " x " + std::to_string(s.host_grad_bytes) + " B x " +
              count_text(static_cast<double>(records.group())) +
              " (tierzero.grad_ring_records slots of a record, freed as the optimizer reads it in the backward)");
    } else {
      pin("gradient partition" + grads16, {PinnedRole::kGradients},
          std::to_string(s.host_grad_bytes) + " B x " + count_text(static_cast<double>(s.partition)) +
              (s.host_grad_bytes == 2 ? " (tierzero.offload_grad_dtype: summed in fp32 on the GPU, rounded once)"
                                      : ""));
    }
    pin("gradient staging slots", {PinnedRole::kGradStaging},
        std::to_string(s.staging_slots) + " x min(4 B x " + count_text(static_cast<double>(s.landing)) +
            ", 64 MiB) (offload_optimizer.buffer_count slots of the largest bucket, landed in fp32)");
    pin("16-bit weights bound for the GPU", {PinnedRole::kWeights16},
        "2 B x " + count_text(static_cast<double>(s.partition)) +
            (s.layout.compact_master ? " (the compact master's other half)" : ""));
  }
  if (s.params_nvme) {
    pin("parameters kept in memory", {PinnedRole::kParamRecords},
        std::to_string(e) + " B x " + count_text(static_cast<double>(s.params_in_cpu)) +
            " (offload_param.max_in_cpu, whole sub-groups)");
    pin("parameter read buffers", {PinnedRole::kParamReadBuffer},
        std::to_string(s.param_buffers) + " x (" + std::to_string(e) + " B x " +
            count_text(static_cast<double>(s.param_buffer_numel)) +
            " rounded up to 4096, + 2 x 4096) (offload_param.buffer_count x buffer_size)");
    pin("parameter write windows", {PinnedRole::kParamWindow},
        "2 x " + std::to_string(e) + " B x " + count_text(static_cast<double>(records.group())) + " (sub_group_size)");
  } else if (s.params_pinned) {
    pin("parameter shard", {PinnedRole::kParamShard},
        std::to_string(e) + " B x " + count_text(static_cast<double>(s.partition)));
  }
  if (s.frozen_nvme)
    out.add(Tier::kPinned, "frozen base: NVMe staging, 2 units", Phase::kResident,
            static_cast<double>(listed_bytes(frozen)), "2 x the largest unit, in whole records (a pool of its own)");
  else if (!frozen.empty())
    out.add(Tier::kPinned, "frozen base weights (tierzero.lora)", Phase::kResident,
            static_cast<double>(listed_bytes(frozen)),
            std::to_string(e) + " B x " + count_text(static_cast<double>(s.frozen_parameters)) +
                " (no gradients, no optimizer state; a pinned pool of its own)");
  const uint64_t rounding = offload::pinned_capacity(pinned) - listed_bytes(pinned) + frozen_pool - listed_bytes(frozen);
  out.add(Tier::kPinned, "pinned pool: block alignment, whole pages", Phase::kResident, static_cast<double>(rounding),
          "PinnedHostPool::footprint of each buffer, each pool rounded up to 4096");
  const SwapBytes swap =
      swap_bytes(s, kept, zero.offload_optimizer.nvme_paths.size(), zero.offload_param.nvme_paths.size());
  if (s.optimizer_nvme) {
    out.add(Tier::kNvme, state, Phase::kResident, static_cast<double>(swap.optimizer),
            std::to_string(records.count() - kept) + " records x " + per_element(s.layout) + " x " +
                count_text(static_cast<double>(records.group())) + " (each path's share rounded up to 4096)");
    s.nvme_state_moved_bytes = streamed_bytes_per_step(s.layout, records, kept, zero.offload_optimizer.buffer_count);
  }
  if (s.params_nvme)
    out.add(Tier::kNvme, "parameter shard", Phase::kResident, static_cast<double>(swap.params),
            std::to_string(std::max<int64_t>(1, records.count())) + " records x " + std::to_string(e) + " B x " +
                count_text(static_cast<double>(records.group())) + " (each path's share rounded up to 4096)");
  if (s.frozen_nvme)
    out.add(Tier::kNvme, "frozen base weights (tierzero.lora)", Phase::kResident,
            static_cast<double>(frozen_swap_bytes(disk, zero.offload_param.nvme_paths.size())),
            std::to_string(disk.records) + " records of " + format_bytes(disk.chunk_bytes) +
                " (each unit's weights 64-byte aligned, the unit rounded up to 4096)");
}

// What one micro-batch's recomputation holds at the backward's peak: a decoder layer's intermediates
// (LoRA dropout's copies and masks included) and the LM head's logits, loss and their gradients.
// `kept`: what one micro-batch's graph of a decoder layer holds from its forward to its backward when
// the window keeps it (tierzero.kept_activations): the saved intermediates alone.
struct RecomputeBytes {
  double layer = 0;
  double logits = 0;
  double kept = 0;
};
RecomputeBytes recompute_bytes(const ModelDims& m, const RunShape& s) {
  const double tokens = static_cast<double>(s.micro) * s.seq;
  // LoRA dropout: each adapted projection's dropped input (e bytes) and its mask (1 byte) per feature.
  const double dropout_per_token = static_cast<double>(s.lora_dropout_features) * (s.compute_bytes + 1);
  const LayerBytes layer = layer_bytes_per_token(m, s.compute_bytes, s.seq, !s.compute_on_cpu && s.compute_bytes == 2);
  return {.layer = tokens * (layer.recomputed + dropout_per_token),
          .logits = tokens * static_cast<double>(m.vocab_size) * std::max(16, 12 + 2 * s.compute_bytes),
          .kept = tokens * (layer.kept + dropout_per_token)};
}

// What a window group of `group` micro-batches adds to the backward's peak: its decoder layer
// recomputed over all of them, past the one-micro-batch recomputation the peak already holds (the
// layer's or the LM head's, whichever is larger; the head still runs one micro-batch at a time).
double window_group_bytes(int64_t group, const RecomputeBytes& r) {
  return std::max(0.0, static_cast<double>(group) * r.layer - std::max(r.layer, r.logits));
}

// tierzero.window_group resolved: the group asked for, or "auto": on a GPU the largest divisor of the
// accumulation steps whose group fits the room beside `held` (the window's other bytes and the
// accumulator); 1 without a GPU.
int64_t window_group(int64_t asked, const RunShape& s, const RecomputeBytes& r, const state_layout::GpuRoom& room,
                     uint64_t held) {
  if (asked != kWindowGroupAuto) return asked;
  if (s.compute_on_cpu) return 1;
  for (int64_t g = s.accum; g > 1; --g)
    if (s.accum % g == 0 && room.fits(held + static_cast<uint64_t>(window_group_bytes(g, r)))) return g;
  return 1;
}

// One kept decoder layer (window_pass.h): every micro-batch's graph of it, and its matmul weights,
// which the graphs hold from the forward to the backward (the frozen base's with tierzero.lora).
double kept_layer_bytes(const ModelDims& m, const RunShape& s, const RecomputeBytes& r) {
  return static_cast<double>(s.accum) * r.kept + static_cast<double>(layer_matmul_params(m)) * s.compute_bytes;
}

// tierzero.kept_activations resolved: the layers asked for (at most the model's), or "auto": on a GPU
// the most whose graphs fit the room beside `held` (the window's other bytes), counting a group's
// recomputation only while some layer is still recomputed, within 90 % of the budget (the graphs'
// many tensors of every size fragment the allocator's segments; the rest of the plan is counted to
// the byte); 0 without a GPU.
int64_t kept_layers(int64_t asked, const ModelDims& m, const RunShape& s, const RecomputeBytes& r,
                    state_layout::GpuRoom room, uint64_t held, double group_bytes) {
  const int64_t layers = m.num_hidden_layers;
  if (asked != kKeptActivationsAuto) return std::min(asked, layers);
  if (s.compute_on_cpu) return 0;
  room.budget = room.budget / 10 * 9;
  for (int64_t k = layers; k > 0; --k) {
    const double recomputed = k < layers ? group_bytes : 0.0;
    if (room.fits(held + u(static_cast<double>(k) * kept_layer_bytes(m, s, r) + recomputed))) return k;
  }
  return 0;
}

void activations(Items& out, const ModelDims& m, const RunShape& s) {
  const double tokens = static_cast<double>(s.micro) * s.seq;
  const int e = s.compute_bytes;
  out.add(Tier::kGpu, "activations: unit inputs kept", Phase::kBackward,
          tokens * (static_cast<double>(m.num_hidden_layers + 1) * m.hidden_size * e + 8),
          std::to_string(m.num_hidden_layers + 1) + " x [" + std::to_string(s.micro) + " x " + std::to_string(s.seq) +
              " x " + std::to_string(m.hidden_size) + "] x " + std::to_string(e) + " B + token ids");
  const RecomputeBytes recompute = recompute_bytes(m, s);
  const double layer = recompute.layer, logits = recompute.logits;
  out.add(Tier::kGpu,
          logits >= layer ? "activations: LM head recomputed (logits, loss)" : "activations: one layer recomputed",
          Phase::kBackward, std::max(layer, logits),
          fmt::format("max(layer {} B/token, logits [{} x {}] fp32 x 4) x {} tokens", count_text(layer / tokens),
                      s.micro * s.seq, m.vocab_size, count_text(tokens)));
}

void buffers(Items& out, const RunShape& s) {
  out.add(Tier::kGpu, "CUDA context (not in the allocator's peak)", Phase::kResident, kCudaContextBytes, "~500 MB");
  out.add(Tier::kPageable, "process runtime (LibTorch, CUDA host side)", Phase::kResident, kHostRuntimeBytes, "~1 GiB");
  // Each rank reads its shard's ranges from the trainer's weight source (functional_model.h) into a
  // 64 MiB fp32 piece; a checkpoint's reading threads hold a buffer each, a random draw writes each
  // range straight into the piece (random_param_source.cpp).
  if (s.weights_from_checkpoint) {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    out.add(Tier::kPageable, "weights read from safetensors at start-up", Phase::kStartup,
            kStreamPieceBytes + threads * kReadBufferBytes,
            "a 64 MiB fp32 piece (param_loading.cpp) + 2 MiB x " + std::to_string(threads) +
                " reading threads (this machine's cores; param_source.cpp)");
  } else {
    out.add(Tier::kPageable, "random weights drawn at start-up", Phase::kStartup, kStreamPieceBytes,
            "a 64 MiB fp32 piece (param_loading.cpp), each range drawn straight into it");
  }
}

// Periodic saves (tierzero.checkpoint.save_every): the rank file's write-behind buffers, allocated
// once for the run (checkpoint/storage's WriteBuffers: 16 MiB each, at least 4, as many as
// tierzero.checkpoint.write_behind asks; "auto" the rank's checkpoint, which the run caps at half of
// MemAvailable when the host has less to spare). The checkpoint: the partition as one record of the
// state's moments with a 4-byte master (a compact one's two halves).
void checkpoint_buffers(Items& out, const RunShape& s, const DsConfig& config) {
  constexpr int64_t kBuffer = int64_t{16} << 20, kMinBuffers = 4;
  if (config.tierzero.checkpoint_save_every <= 0) return;
  const int64_t checkpoint = state_layout::Layout{.moments = s.layout.moments}.record_bytes(s.partition);
  const bool automatic = config.tierzero.checkpoint_write_behind == kWriteBehindAuto;
  const int64_t asked = automatic ? checkpoint : config.tierzero.checkpoint_write_behind;
  const int64_t buffers = std::max(kMinBuffers, (asked + kBuffer - 1) / kBuffer);
  out.add(Tier::kPageable, "checkpoint write-behind buffers (periodic saves)", Phase::kResident,
          static_cast<double>(buffers * kBuffer),
          std::to_string(buffers) + " x 16 MiB: " +
              (automatic ? "write_behind \"auto\", the rank's checkpoint " +
                               count_text(static_cast<double>(checkpoint)) + " B (at most half of MemAvailable at run time)"
                         : "tierzero.checkpoint.write_behind " + std::to_string(asked) + " B, at least 64 MiB"));
}

}  // namespace

std::vector<MemoryItem> memory_items(const ModelDims& model, const DsConfig& config, RunShape& shape) {
  Items out;
  shape.records_in_memory = 0;
  shape.nvme_state_moved_bytes = 0;
  parameters(out, shape, config.zero);
  frozen_base(out, shape, config.zero);
  gradients(out, shape, config.zero);
  optimizer(out, shape);
  host_buffers(out, shape, config);
  activations(out, model, shape);
  buffers(out, shape);
  checkpoint_buffers(out, shape, config);
  return out.take();
}

std::vector<MemoryItem> engine_choice_items(const ModelDims& model, const DsConfig& config, const Machine& machine,
                                            uint64_t planned_gpu_peak, RunShape& s) {
  Items out;
  s.forward_window = false;
  s.steps_in_backward = false;
  s.device_accumulator = false;
  s.window_bytes = 0;
  s.window_group = 1;
  s.kept_layers = 0;
  // The engine's room and its accumulator choice (engine/layout): the same functions.
  const state_layout::GpuRoom room{.on_gpu = !s.compute_on_cpu,
                                   .budget = config.tierzero.gpu_memory_limit > 0 ? config.tierzero.gpu_memory_limit
                                                                                  : machine.gpu_memory_bytes,
                                   .planned_peak = planned_gpu_peak};
  using state_layout::GradAccumulator;
  const OffloadGradAccumulator asked = config.tierzero.offload_grad_accumulator;
  const GradAccumulator requested = asked == OffloadGradAccumulator::kDevice ? GradAccumulator::kDevice
                                    : asked == OffloadGradAccumulator::kHost ? GradAccumulator::kHost
                                                                             : GradAccumulator::kAuto;
  uint64_t accumulator = 0;
  if (s.optimizer_offloaded && state_layout::grad_accumulator(requested, s.accum, s.partition, room).on_device) {
    accumulator = state_layout::accumulator_bytes(s.partition);
    s.device_accumulator = true;
    out.elements(Tier::kGpu, "gradient accumulator (fp32, the partition)", Phase::kResident, 4, s.partition,
                 "(tierzero.offload_grad_accumulator: asked for, or it fits)");
  }
  if (s.accum < 2) return out.take();
  // The window's bytes as the engine counts them (the same function): the other micro-batches' inputs
  // of every body unit and their output gradients, and one unit's fp32 gradient sums.
  const auto window = static_cast<double>(plan::window_bytes(s.accum, s.micro * s.seq, model.hidden_size,
                                                             model.num_hidden_layers + 2, s.largest_unit,
                                                             s.compute_bytes));
  s.window_bytes = s.window_possible ? window : 0.0;
  const uint64_t held = accumulator + static_cast<uint64_t>(window);  // what the window's choices fit beside
  if (s.window_possible && room.fits(held)) {
    s.forward_window = true;
    const RecomputeBytes recompute = recompute_bytes(model, s);
    s.window_group = window_group(config.tierzero.window_group, s, recompute, room, held);
    const double group_bytes = window_group_bytes(s.window_group, recompute);
    s.kept_layers = kept_layers(config.tierzero.kept_activations, model, s, recompute, room, held, group_bytes);
    if (s.kept_layers > 0 && !s.compute_on_cpu)
      out.add(Tier::kGpu, "window: kept decoder layers' graphs", Phase::kBackward,
              static_cast<double>(s.kept_layers) * kept_layer_bytes(model, s, recompute),
              std::to_string(s.kept_layers) + " x (" + std::to_string(s.accum) + " x " + count_text(recompute.kept) +
                  " B + " + std::to_string(s.compute_bytes) + " B x " +
                  count_text(static_cast<double>(layer_matmul_params(model))) +
                  " weights) (tierzero.kept_activations: the last layers' graphs, not recomputed; window_pass.h)");
    if (s.window_group > 1 && !s.compute_on_cpu && s.kept_layers < model.num_hidden_layers)
      out.add(Tier::kGpu, "window: a group's decoder layer recomputed", Phase::kBackward, group_bytes,
              std::to_string(s.window_group) + " x layer " + count_text(recompute.layer) + " B - max(layer, logits " +
                  count_text(recompute.logits) + " B) (tierzero.window_group: " + std::to_string(s.window_group) +
                  " micro-batches a batch through each decoder layer; window_pass.h)");
    // The step followed, and the engine's own test (engine/layout).
    s.steps_in_backward = s.follows_step && state_layout::step_in_backward_refusal(
                                                s.world == 1, s.params_nvme, config.gradient_clipping,
                                                config.precision() == Precision::kFp16) == nullptr;
    if (s.steps_in_backward && s.optimizer_nvme)  // every pass back to front: the buffers keep nothing for the next
      s.nvme_state_moved_bytes = state_layout::streamed_bytes_per_step(s.layout, s.records(), s.records_in_memory, 0);
    if (!s.compute_on_cpu)
      out.add(Tier::kGpu, "window: other micro-batches' unit inputs, grads", Phase::kBackward, window,
              std::to_string(s.accum - 1) + " x " + std::to_string(model.num_hidden_layers + 2) + " x [" +
                  std::to_string(s.micro) + " x " + std::to_string(s.seq) + " x " + std::to_string(model.hidden_size) +
                  "] x " + std::to_string(s.compute_bytes) + " B + 4 B x " + count_text(s.largest_unit) +
                  " (inputs and output gradients kept; one unit's fp32 gradient sums; window_pass.h)");
  }
  return out.take();
}

uint64_t peak_bytes(const std::vector<MemoryItem>& items, const std::vector<Tier>& tiers) {
  uint64_t resident = 0, phases[4] = {0, 0, 0, 0};
  for (const MemoryItem& item : items) {
    if (std::find(tiers.begin(), tiers.end(), item.tier) == tiers.end()) continue;
    (item.phase == Phase::kResident ? resident : phases[static_cast<int>(item.phase)]) += item.bytes;
  }
  return resident + *std::max_element(std::begin(phases), std::end(phases));
}

std::string count_text(double count) {
  return count < 1e4 ? fmt::format("{:.0f}", count) : fmt::format("{:.4g}", count);
}

}  // namespace tierzero::engine::plan
