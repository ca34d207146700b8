// Offloaded gradients: every reduced bucket leaves the device for a gradient partition in host memory
// (fp32, or bf16 with tierzero.offload_grad_dtype), while backward goes on.
//
//   backward thread:  land(bucket)  --take a free staging slot (offload's StagingSlots; blocks only
//                     when all are in use)-->
//                     DeviceCopies::to_host on the D2H side stream, ordered after the reduction
//   worker thread:    wait for that copy's event --> partition[run] += slot[run] * scale with
//                     cpu_adam's SIMD kernel on every core the optimizer may use, and the sum of
//                     squares of the run's new values recorded --> the slot is free again
//
// Buckets are added in the order they landed (FIFO), so the partition is the same, bit for bit,
// whether the worker overlaps backward (overlap on) or land() does it all before returning
// (overlap off, the plain path through the same kernels). The squared norm of the accumulated
// gradient is known when the last bucket of the step has landed, without another pass: each run's
// sum of squares is recorded when it is added, a later addition replacing what it covers (the next
// micro-batch), and grad_stats() sums them in partition order (run_norms.h). Runs need not repeat
// their boundaries: a bucket that straddles two micro-batches lands its parameters at other
// slot-piece boundaries, and the parts of a run that a later run cut are summed again from the
// partition (found on the H200: a 1.35B model's embedding landed split at two different places).
//
// Staging slots need not hold a whole bucket: a bucket larger than a slot is copied and added in
// pieces of as many elements as the slot holds in fp32 (whatever the bucket's dtype), and a piece no
// run reads is not copied at all. Slots are sized by the engine
// (ZeroEngineOptions::grad_staging_slot_bytes), not by reduce_bucket_size.
//
// A bucket that is the whole of its runs' gradient for the step (the sums of a device accumulator,
// offloaded_grads.h) skips the slots and the addition: land_final() scales it on the device and
// copies each run straight into the partition's pinned memory, and the worker only takes the run
// norms once the copy has run. The host reads 4 bytes per element instead of 12 (slot, partition,
// partition written), and backward never waits for a slot. The norms are recorded for the same
// slot-sized pieces land() would cut, with grad_stats (the summation order of accumulate_scaled),
// so the recorded sums, and the partition (0 + x*s == x*s), are the same bits as land()'s.
//
// The gradient ring (tierzero.grad_ring_records; only where the optimizer steps inside the window's
// backward, backward_step.h): instead of the whole partition, a few record-sized slots lent to
// records by offload's RecordSlots, which keeps which record holds which slot. Runs are cut at record
// boundaries; the backward thread lends a record a free slot when a run first lands on it (blocking
// while every slot is held: the backward then keeps the optimizer's pace), and the optimizer, reading
// each final record once through lend(), gives it back: its cut runs' norms are summed from the
// slot, the record releases it, the worker zeroes the slot and frees it. Each element holds
// the bits it would hold in the partition, so Adam reads the same gradients; only the norm's runs
// are cut at other places (the reported norm's last bits).
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "cpu_adam/adam.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/run_norms.h"
#include "engine/zero/internal/traced_thread.h"

namespace tierzero::engine {

// `numel` elements of a landed bucket, from `source_offset` in it, added at `partition_offset`.
struct LandingRun {
  int64_t partition_offset = 0;
  int64_t source_offset = 0;
  int64_t numel = 0;
};

// Where the pipeline lands the gradients: the whole partition, or the gradient ring.
struct GradLanding {
  at::Tensor partition;          // fp32 or bf16 (tierzero.offload_grad_dtype), contiguous, host memory
  std::vector<at::Tensor> ring;  // or (partition undefined) slots of `record_numel` elements, fp32 or bf16
  int64_t record_numel = 0;      // the ring's: the optimizer's sub-group
  int64_t numel = 0;             // the ring's: the partition's elements
};

class HostGradPipeline {
 public:
  // Adds into `landing` (a bf16 one holds each sum rounded to nearest even) through `staging` (byte
  // tensors in pinned host memory, all of one size, at least 8 bytes; at least one slot), copying
  // with `copies` and adding with `adam`'s kernel (both outlive the pipeline); every landed
  // element is multiplied by `scale` (1 / world size: the average over ranks).
  HostGradPipeline(GradLanding landing, const std::vector<at::Tensor>& staging, DeviceCopies& copies,
                   const cpu_adam::CpuAdam& adam, float scale, bool overlap);
  ~HostGradPipeline();
  HostGradPipeline(const HostGradPipeline&) = delete;
  HostGradPipeline& operator=(const HostGradPipeline&) = delete;

  // Takes a reduced bucket `source` (flat, contiguous, fp32 | bf16 | fp16, on the compute device;
  // its reduction waited for, or ordered on the current stream) and adds source[run] * scale into
  // the partition for each run (disjoint ranges), a staging slot's worth of fp32 elements at a time
  // (an fp32 piece bound for a bf16 partition is rounded to bf16 on the device before it leaves).
  // Blocks only while every staging slot (ring: every ring slot) is in use; `source` may be dropped
  // by the caller once this returns. Throws tierzero::Error when `source` is not contiguous or an
  // earlier bucket failed.
  void land(const at::Tensor& source, std::vector<LandingRun> runs);
  // As land(), for a `source` in fp32 that holds all of its runs' gradient this step (nothing else
  // lands on those elements before the next reset()): source[run] * scale (rounded once to bf16 on
  // the device for a bf16 partition) is copied D2H straight into the partition, overwriting it,
  // after the work queued on the current stream. Never waits for a staging slot; waits only for
  // the worker to finish zeroing the partition after zero_partition().
  // Throws tierzero::Error when `source` is not a contiguous fp32 tensor or an earlier bucket failed.
  void land_final(const at::Tensor& source, std::vector<LandingRun> runs);
  // Calls `landed` (on the worker's thread, or before returning without overlap) once every bucket
  // landed so far is in the partition; buckets landed after this call do not hold it up.
  void notify_landed(std::function<void()> landed);
  // Waits until every landed bucket is in the partition. Throws the worker's error, if any.
  void drain();
  // The squared L2 norm of the partition and whether it is finite, from the recorded runs; valid
  // after drain() (ring: while the optimizer still steps too). Ranges never landed since reset()
  // count as zero (the caller keeps the partition zero there: offloaded_grads.h).
  cpu_adam::GradStats grad_stats();
  // Forgets the recorded runs; call after drain(). Ring: frees the slots of records the optimizer did
  // not read (a step that was abandoned). The partition keeps its values: zero_partition() or
  // land_final() over every element makes the next step's.
  void reset();
  // Zeroes the partition (no-op with the ring: a slot is zeroed when freed), before any bucket
  // landed after this call; with overlap the worker zeroes it in the background (land_final() and
  // drain() wait for it).
  void zero_partition();

  // The optimizer stepping inside the backward failed with `error` (ring only): every held slot is
  // freed, and landing throws `error` from now on instead of waiting for a slot no one will free.
  void abandon_ring(std::exception_ptr error);

  // Ring only: elements [begin, begin + count) of a final record's gradients (within one record),
  // read by the optimizer inside the backward; data nullptr when nothing landed there this step
  // (all zero).
  cpu_adam::ConstElements lend(int64_t begin, int64_t count);
  // Ring only: [begin, begin + count), lent, has been read for good: once its whole record has, its
  // slot is zeroed and taken by the next record.
  void consumed(int64_t begin, int64_t count);

  // The partition; undefined with the ring.
  at::Tensor partition() const { return partition_; }
  int64_t numel() const { return numel_; }
  int64_t record_numel() const { return record_numel_; }
  bool lands_in_ring() const { return ring_ != nullptr; }
  // Seconds since the last reset(): the copies ran on the D2H stream (with timing on), and the
  // backward thread waited for a free staging slot.
  double copy_seconds() const { return copy_seconds_; }
  double blocked_seconds() const { return blocked_seconds_; }

 private:
  enum class JobKind {
    kAdd,            // a slot's piece: add its runs into the partition
    kRecordNorms,    // land_final(): runs already copied into the partition; record their norms
    kZeroPartition,  // zero_partition(): zero the partition (no slot, no copy)
    kNotify,         // notify_landed(): call `landed`
    kFreeRingSlot,   // consumed(): zero ring slot `slot`, released by its record, then free it
  };
  struct Job {
    JobKind kind = JobKind::kAdd;
    size_t slot = 0;
    ElementType type = ElementType::kF32;
    std::vector<LandingRun> runs;  // kRecordNorms: source_offset unused, one run per slot-sized piece
    std::vector<std::unique_ptr<CopyDone>> copies;
    std::function<void()> landed;  // kNotify
    TracedFrom traced;             // the profiler state of the thread that queued it (train --profile)
  };
  // Elements of a slot-sized piece: a slot's worth of fp32 elements, whatever the source's dtype (an
  // fp32 bucket and a 16-bit one of the same shape are cut at the same elements; offloaded_grads.h
  // relies on it).
  int64_t piece_numel() const { return static_cast<int64_t>(slots_.slot_bytes() / sizeof(float)); }
  // `runs` cut at the slot-sized pieces of a source of `numel` elements, offsets relative to each
  // piece: what land() lands per piece (pieces no run reads are left out).
  std::vector<std::pair<int64_t, std::vector<LandingRun>>> cut_into_pieces(int64_t numel,
                                                                           const std::vector<LandingRun>& runs) const;
  // Lands `piece` (at most a slot) for `runs` (offsets relative to `piece`).
  void land_piece(const at::Tensor& bucket_piece, std::vector<LandingRun> runs);
  // Ring: `runs` cut where records end; else `runs`.
  std::vector<LandingRun> cut_at_records(std::vector<LandingRun> runs) const;
  // Ring: lends a slot to each record `runs` land on that has none (blocking while none is free).
  // Throws the pipeline's error, the slot just lent given back, once landing has failed.
  void hold_records(const std::vector<LandingRun>& runs);
  // Where partition element `offset` lands (ring: in its record's slot, which it holds).
  std::byte* landing_at(int64_t offset);
  // Ring: sums the cut norm runs of `record` from its slot's bytes `slot`.
  void settle_norms(int64_t record, std::span<const std::byte> slot);
  // Runs one job on the calling thread: waits for its copies, then adds or records.
  void run(Job& job);
  // Waits for the job's copy, adds its runs, records their norms.
  void accumulate(Job& job);
  // Waits for the job's copies, records the norms of its runs as they are in the partition.
  void record_norms(Job& job);
  // Hands `job` to the worker (overlap on) or runs it now.
  void submit(Job job);
  // After `job` ran: its staging slot is given back, a finished zeroing no longer holds off
  // land_final(). With mutex_ held.
  void release(const Job& job);
  void work();
  at::Tensor partition_;                         // undefined with the ring
  int64_t numel_ = 0;                            // the partition's elements
  at::ScalarType dtype_;                         // the landed gradients' (fp32 or bf16)
  ElementType element_type_ = ElementType::kF32;  // dtype_ as cpu_adam's
  std::unique_ptr<offload::RecordSlots> ring_;   // the ring's slots and the records holding them, or nullptr
  int64_t record_numel_ = 0;                     // the ring's records
  offload::StagingSlots slots_;                  // the staging tensors' bytes
  DeviceCopies& copies_;
  const cpu_adam::CpuAdam& adam_;
  float scale_;
  bool overlap_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  size_t busy_ = 0;       // jobs taken by the worker, not yet done
  bool zeroing_ = false;  // a reset()'s zeroing is queued or running
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
  std::vector<int64_t> consumed_;  // by record: elements the optimizer has read this step (with mutex_)

  std::mutex norms_mutex_;  // run_norms_: recorded by the worker, settled by the optimizer
  RunNorms run_norms_;      // the accumulated partition's sum of squares, by run
  double copy_seconds_ = 0.0;
  double blocked_seconds_ = 0.0;
};

}  // namespace tierzero::engine
