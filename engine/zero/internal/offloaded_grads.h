// Where the reduced gradient buckets of an offloaded step go. Two modes:
//
//   host    every bucket of every micro-batch lands at once: the host gradient pipeline
//           (host_grad_pipeline.h) copies it D2H and adds it, times 1/W, into the fp32 host
//           partition. A step with A micro-batches copies and adds the partition A times. A window
//           that is the step's only one and its last (the window pass, window_pass.h, which hands
//           each unit's gradients summed over every micro-batch once; or one micro-batch a step)
//           holds each range's whole gradient: its buckets land as the device mode's last
//           micro-batch does (land_final: straight into the partition, no staging slot, no host
//           addition; a range landing twice is added, as below). The host then reads 2-4 bytes
//           an element for the norm instead of 6-12, and the backward never waits for a slot.
//   device  with gradient accumulation, a bucket launched before the window's last micro-batch is
//           added (fp32, in its reduction's stream order) into an accumulator of this rank's
//           partition on the compute device; a bucket launched in the last micro-batch hands the
//           pipeline the sum accumulator + bucket for its runs (an fp32 bucket of the same shape,
//           HostGradPipeline::land_final: copied straight into the host partition, no staging
//           slot, no host addition) and zeroes those accumulator runs. One D2H copy per step and a
//           read-only CPU pass for the norm; partition_numel x 4 bytes of device memory. A
//           range that lands a second time in the window (a parameter used twice in stage 3, as
//           tied embeddings) is added through a staging slot, as the host mode does.
//
// Zeroing the partition: only a window that adds needs it (host mode's micro-batches), and it is
// zeroed when such a window begins. A window that lands final overwrites what it lands; when it is
// drained the ranges it did not land are zeroed (usually none: every parameter lands each step, a
// gradient-less one as zeros), so no step writes the whole partition twice (on the H100 box the
// 14B's 29.6 GB zero fill took 0.9 s of host memory bandwidth beside the optimizer, and the first
// landing of the backward waited for it).
//
// Bit for bit: the pipeline multiplies each landed value by s = 1/W. For W a power of two the
// product is exact (no fp32 overflow or subnormal results), so (g1 + g2 + ... + gA) * s, summed here
// in fp32 in landing order, equals g1*s + g2*s + ... + gA*s summed in the host partition by the host
// mode. The last landing hands the pipeline buckets of the same shapes and runs the host mode's last
// landing does, and the pipeline cuts a bucket into pieces by element count whatever its dtype, so
// the recorded run norms (run_norms.h), the global norm and the clip factor are the same bits too.
//
// Which buckets land is decided when a bucket is launched (lands_now()), not when it is added: in
// stages 1-2 a bucket of one micro-batch is added while the next one's backward runs. A window that
// ends before its last micro-batch (step() after fewer micro-batches than configured) lands the
// whole accumulator when drained.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <vector>

#include "engine/zero/internal/host_grad_pipeline.h"

namespace tierzero::engine {

class OffloadedGrads {
 public:
  // Host mode when `accumulator` is undefined; else device mode with `accumulator` (fp32, zeroed,
  // contiguous, the pipeline partition's numel, on the compute device). `pipeline` outlives this.
  OffloadedGrads(HostGradPipeline& pipeline, at::Tensor accumulator);

  bool accumulates_on_device() const { return accumulator_.defined(); }
  // Starts a micro-batch (or a window pass of several); `last`: it ends the accumulation window, so
  // buckets launched from now on until the next reset() land. In host mode a `last` one that is the
  // first since reset() holds every range's whole gradient: its buckets land final.
  void begin_micro_batch(bool last);
  // Whether a bucket launched now is to land (always in host mode).
  bool lands_now() const { return !accumulates_on_device() || last_micro_batch_; }
  // Whether buckets taken now land final (the partition overwritten, not added to): device mode's
  // last micro-batch, or host mode's only window.
  bool lands_final() const { return last_micro_batch_ && (accumulates_on_device() || only_window_); }

  // Takes a reduced bucket `source` (as HostGradPipeline::land: flat, contiguous, on the compute
  // device, its reduction ordered on the current stream) for `runs`; `lands` is what lands_now()
  // said when the bucket was launched. Blocks only while every staging slot is busy.
  void take(const at::Tensor& source, std::vector<LandingRun> runs, bool lands);
  // Lands what the accumulator still holds when the window had no last micro-batch, then waits
  // until everything landed is in the partition. Throws the pipeline's error, if any.
  void drain();
  // Zeroes the host partition for the next window (after drain()).
  void reset();

  // The host partition gradients land in (fp32 or bf16); undefined with the gradient ring.
  at::Tensor partition() const { return pipeline_.partition(); }

 private:
  // Disjoint element ranges of the partition.
  class Ranges {
   public:
    // Adds [offset, offset + numel), which overlaps no range inserted.
    void insert(int64_t offset, int64_t numel);
    void clear() { ends_.clear(); }
    // [offset, offset + numel) cut where inserted ranges begin and end, in order: each piece as
    // (offset, numel, whether an inserted range holds it).
    struct Piece {
      int64_t offset = 0;
      int64_t numel = 0;
      bool inserted = false;
    };
    std::vector<Piece> cut(int64_t offset, int64_t numel) const;

   private:
    std::map<int64_t, int64_t> ends_;  // end -> begin
  };

  // Zeroes the host partition's elements no range of landed_ holds (nothing with the ring: its
  // slots are zeroed when freed).
  void zero_unlanded();

  HostGradPipeline& pipeline_;
  at::Tensor accumulator_;
  Ranges landed_;        // copied straight into the host partition since the last reset()
  bool zeroed_ = false;  // the elements landed_ does not hold are zero (the partition was zeroed)
  bool last_micro_batch_ = false;
  bool began_ = false;        // a micro-batch began since the last reset()
  bool only_window_ = false;  // host mode: the micro-batch that began is the first since reset()
  bool accumulated_ = false;  // something was added to the accumulator since the last reset()
};

}  // namespace tierzero::engine
