// The optimizer of one rank's partition: Adam / AdamW on fp32 master weights with moments m, v.
// Two placements share this interface:
//   device: master, m, v on the compute device, stepped by LibTorch's fused AdamW kernel;
//   offloaded: master, m, v in records of one sub-group each (record_adam.h: in the engine's
//       pinned host tier, some or all on NVMe), stepped by cpu_adam's SIMD kernel a piece at a
//       time, which writes the 16-bit copy of the new weights in the same pass.
// state() is the seam where the state is read and written whole; checkpoints go through
// state_reader() / load_state(), which an NVMe-backed state streams, or, for a compact state, its
// stored parts (stored_readers() / load_stored(): the state saved as it lives).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cpu_adam/adam.h"
#include "engine/layout/layout.h"
#include "engine/zero/internal/grads_final.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/step_progress.h"

namespace tierzero::engine {

class DeviceShare;
class SaveProgress;  // save_progress.h

struct AdamConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = true;  // AdamW; false: Adam with L2 added to the gradient
  bool bias_correction = true;
};

// One rank's optimizer state: flat partitions (the master fp32; m and v fp32, or bf16 in the
// the record optimizer with tierzero.optimizer_state_dtype "bf16") and the number of steps applied.
// With a compact master or 8-bit moments (CompactState) the record optimizer materialises fp32
// copies here (state(): O(partition) x 12 bytes of unpinned host memory) that the next step, save or
// read writes back (split / encoded) and frees.
struct AdamPartitionState {
  at::Tensor master;
  at::Tensor exp_avg;
  at::Tensor exp_avg_sq;
  int64_t step = 0;
};

// One state of the partition (0 the fp32 master, 1 exp_avg, 2 exp_avg_sq) read in order: each call
// fills `out` with the state's next out.size() bytes, in its checkpoint dtype (checkpoint_dtype()):
// the master always fp32 (a compact master is joined), the moments in the dtype the optimizer holds
// them in, or fp32 for 8-bit moments (decoded).
using state_layout::RecordPart;

// The record layout (engine/layout, which the planner sizes records with too) of a state whose
// moments are `state_dtype` (kFloat, kBFloat16, or kChar: 8-bit codes) and whose master is compact
// or fp32.
inline state_layout::Layout record_layout(at::ScalarType state_dtype, bool compact_master) {
  return {.compact_master = compact_master,
          .moments = state_dtype == at::kChar       ? state_layout::Moments::kInt8Blockwise
                     : state_dtype == at::kBFloat16 ? state_layout::Moments::kBf16
                                                    : state_layout::Moments::kFp32};
}
static_assert(state_layout::kMomentBlock == static_cast<int64_t>(cpu_adam::kMomentBlock));

using StateReader = std::function<Status(std::span<std::byte> out)>;
// Fills `out` with elements [begin, begin + n) of state `state` (n = out.size() / its element size),
// in its checkpoint dtype (as StateReader).
using StateFill = std::function<Status(int state, int64_t begin, std::span<std::byte> out)>;

// How an offloaded optimizer holds its state, for a compact checkpoint (checkpoint format_version 3,
// docs/formats.md): states held encoded are saved encoded (a compact master as its bf16 weights +
// int16 residual, 8-bit moments as codes + fp32 block scales), the others raw in their dtype; in
// records of record_numel elements (the sub-groups; stored_records.h). encoded() false: the state
// is saved as its checkpoint dtypes (fp32 master, fp32 or bf16 moments), state_reader's.
struct StoredLayout {
  state_layout::Layout record;  // the master (fp32 or compact) and the moments (fp32, bf16, 8-bit)
  int64_t record_numel = 0;     // elements of a full record
  bool moments_8bit() const { return record.moments == state_layout::Moments::kInt8Blockwise; }
  bool encoded() const { return record.compact_master || moments_8bit(); }
};
// Fills `out` with bytes [offset, offset + out.size()) of part `part` of state `s` as stored (the
// checkpoint's state_parts() of StoredLayout's states), for a resume at the same layout.
using StoredFill = std::function<Status(int s, int part, uint64_t offset, std::span<std::byte> out)>;

// What the last step's GPU share did (tierzero.gpu_optimizer_share): `elements` stepped on the
// device; `seconds` from the first piece queued to the last one seen landed by the optimizer's thread
// (which looks after each piece it steps, and waits at the end); `wait_s` that thread blocked at the
// end, the CPU's pieces done (> 0: the GPU set the step's pace).
struct DeviceShareStats {
  int64_t elements = 0;
  double seconds = 0.0;
  double wait_s = 0.0;
};

// NVMe traffic of an optimizer, in bytes (zeros without swap files).
struct NvmeTraffic {
  uint64_t step_read_bytes = 0;     // read by the last step() (and the state() it followed, if any)
  uint64_t step_written_bytes = 0;  // written by the last step() (records kept in the buffers are not)
  double step_wait_s = 0;           // the last step() blocked on the disk (reads, buffers' writes)
  uint64_t resident_bytes = 0;      // the swap files on disk
};

class PartitionOptimizer {
 public:
  virtual ~PartitionOptimizer() = default;

  // Applies Adam step state().step + 1 with learning rate `lr` to the master weights, using
  // grad * grad_multiplier (the unscale and clip factor) as the gradient, then writes the updated
  // weights, cast, into `compute_partition` (same numel; compute dtype and device; undefined when
  // they go through the setup's NvmeParams sink). With `progress` (started for the partition's
  // elements; the record optimizer only, as only an offloaded step follows into the next forward)
  // it publishes each prefix of the partition whose new weights are written, with the copies queued
  // for it, so that another thread may read those elements before the step ends, with the same
  // results bit for bit. Runs on any one thread while nothing else touches the optimizer.
  // With `grads_final` (the record optimizer only; `progress` then null) the step runs inside the
  // backward that still lands `grad`: sub-groups are stepped last to first, each once
  // grads_final->wait_from(its first element) returns, with the same results bit for bit.
  virtual void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
                    StepProgress* progress, GradsFinal* grads_final) = 0;

  // The state, read and written in place (checkpoint save / load).
  virtual AdamPartitionState& state() = 0;
  // The number of steps applied: state().step, without reading the state.
  virtual int64_t step_count() { return state().step; }
  // State `s` for a checkpoint save, piece by piece. The default reads state() (a device state
  // through one host copy of it, a converted one through state()'s fp32 copy); the record optimizer
  // reads its records one sub-group at a time, never the whole state in host memory. Saves of a
  // compact state go through stored_readers() instead. Valid until the optimizer is next stepped or
  // loaded.
  virtual StateReader state_reader(int s);
  // Replaces the state with what `fill` gives, sub-range by sub-range, and the step count with
  // `step` (a checkpoint load). The default fills state() in place (a device state through a host
  // copy); the record optimizer one sub-group at a time into its records. A fill error is returned
  // as is (the state is then partly replaced).
  virtual Status load_state(const StateFill& fill, int64_t step);

  // The layout a compact save stores (encoded() false unless an offloaded optimizer holds a compact
  // master or 8-bit moments).
  virtual StoredLayout stored_layout() const { return {}; }
  // The state as stored (stored_layout().encoded()): one reader per stored part, in the checkpoint's
  // order, streaming each part's bytes over the whole partition (padding included) record by
  // record, sharing one record cursor (stored_records.h), never fp32. Valid until the optimizer is
  // next stepped or loaded. The default: none.
  virtual std::vector<StateReader> stored_readers();
  // Replaces the state with the stored parts `fill` gives (same layout, same partition: bit for bit)
  // and the step count with `step`, record by record. The default: kInternal.
  virtual Status load_stored(const StoredFill& fill, int64_t step);

  // Copies master weights [begin, begin + out.size()) of the partition into `out` (a 16-bit export
  // reads them range by range). The default reads state().master (through a host copy of the range
  // for a device state); the record optimizer reads the master part of the sub-group holding them
  // from its records, keeping the last one read, never the whole state in host memory. Valid until the
  // optimizer is next stepped or loaded.
  virtual Status read_master(int64_t begin, std::span<float> out);

  // Holds the next step's update of each element until `save` is past it (with swap buffers, its
  // whole step: the save reads through them), then forgets it. False, holding nothing, for an
  // optimizer that cannot: its BackgroundSave writes the state before it returns.
  virtual bool hold_for_save(std::shared_ptr<SaveProgress> /*save*/) { return false; }
  // The traffic so far.
  virtual NvmeTraffic traffic() const { return {}; }
  // Seconds the last step's parameter copies to the device ran (0 unless measured).
  virtual double last_copy_seconds() const { return 0.0; }
  // What the last step's GPU share stepped, and when (zeros without one).
  virtual DeviceShareStats last_device_share() const { return {}; }
  // The copies the last step queued into the compute partition and did not order the device's
  // current stream after (Partitioner::defer_reads takes them); empty when step() wrote in place.
  virtual std::vector<PartitionWrite> device_writes() const { return {}; }
  // "device" or "cpu (<SIMD target>, N threads)".
  virtual std::string placement() const = 0;
  // Where the offloaded state lives and its layout, for the run header: "host: compact master (bf16
  // weights + int16 residual), 8-bit moments; 4.02 bytes/param, 1.2 GiB pinned" or, with the state on
  // NVMe, "12 of 40 sub-group records in pinned memory (26.1 GiB), 28 on NVMe (60.9 GiB); ...". Empty
  // for the device optimizer.
  virtual std::string state_placement() const { return {}; }
};

// Adam on the device holding `master_partition` (fp32); m and v start at zero.
std::unique_ptr<PartitionOptimizer> make_device_adam(at::Tensor master_partition, const AdamConfig& config);

// The compact layouts of the offloaded optimizer's state (tierzero.master_weights "compact",
// tierzero.optimizer_state_dtype "int8"):
//   compact master: no fp32 master; its high half is `hi`, the bf16 weights the optimizer writes
//     anyway (the host compute partition itself, or the pinned "16-bit weights" bound for the device),
//     rounded to nearest with ties away from zero, and its low half a 16-bit residual
//     (cpu_adam::AdamBuffers::master_residual): 2 bytes an element instead of 4, bit for bit the fp32
//     master. read_master and state() join them (cpu_adam::join_master); a compact checkpoint stores
//     the two halves (stored_readers), a decoded load splits.
//   8-bit moments: m int8 (kChar) and v uint8 (kByte) codes with one fp32 scale per
//     cpu_adam::kMomentBlock elements (2 + 8/256 bytes an element instead of 8); sub-groups and
//     publish slices start on block boundaries. A compact checkpoint stores the codes and scales; a
//     load from another layout re-encodes the decoded fp32 values (new codes, not the original ones).
struct CompactState {
  bool compact_master = false;
  bool moments_8bit = false;
  at::Tensor hi;  // compact master: bf16, the partition's numel (see above)
};
// The dtype of the moments held in `state_dtype` as fp32-path readers see them (8-bit: decoded, fp32).
at::ScalarType checkpoint_moment_dtype(at::ScalarType state_dtype);

}  // namespace tierzero::engine
