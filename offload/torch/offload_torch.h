// The pieces of offload/'s stack over LibTorch tensors (tierzero_offload_torch; how the stack fits:
// offload/offload.h): the pinned host tier, the side-stream copies between host memory and the GPU,
// the pending writes, and bench pcie's measurement of those copies.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "offload/offload.h"

namespace tierzero::offload {

// ---- Pinned host tier ---------------------------------------------------------------------------
// The offloaded step's pinned host memory, all from one PinnedHostPool: every buffer listed first,
// typed by role (PinnedBufferSpec, offload.h, the list from engine/layout), the total checked against
// tierzero.pinned_memory_limit and allocated at once. Buffers are LibTorch CPU tensors over the
// pool's memory (from_blob): they must not outlive the HostTier.
class HostTier {
 public:
  // Allocates every buffer of `buffers` ((role, index) unique; 0 bytes allowed) zero-filled, pinned
  // for a CUDA `device`, else host memory; `limit_bytes` (tierzero.pinned_memory_limit; 0 = none) caps
  // pinned_capacity(buffers). Throws tierzero::Error naming the key, rank `rank`, the bytes asked
  // buffer by buffer and the limit, or the pool's error.
  static std::unique_ptr<HostTier> create(const std::vector<PinnedBufferSpec>& buffers, uint64_t limit_bytes,
                                          at::Device device, int rank);

  // Buffer `index` of `role` as a flat tensor of `dtype` (its bytes a whole number of elements; an
  // empty tensor for a buffer of 0 bytes). Throws tierzero::Error (internal) when none was listed.
  at::Tensor buffer(PinnedRole role, at::ScalarType dtype, int index = 0) const;
  // Bytes of pinned memory held (the pool's capacity); 0 without a GPU, where nothing is pinned.
  int64_t pinned_bytes() const;
  // Bytes held, pinned or not (the pool's capacity: pinned_capacity of the list).
  int64_t bytes() const;
  // Bytes the buffers take in the pool, alignment included.
  int64_t used_bytes() const;
  // The pool's description, for the start-up banner.
  std::string description() const;

 private:
  struct Held {
    void* data = nullptr;
    uint64_t bytes = 0;
  };
  HostTier() = default;
  std::unique_ptr<PinnedHostPool> pool_;
  std::map<std::pair<PinnedRole, int>, Held> buffers_;
};

// The bytes of `tensor` (contiguous), or of each of `tensors`: the spans the record cache, ring and
// staging slots take.
std::span<std::byte> bytes_of(const at::Tensor& tensor);
std::vector<std::span<std::byte>> bytes_of(const std::vector<at::Tensor>& tensors);
// `bytes` (host memory) as a flat byte tensor over them, not owning them.
at::Tensor byte_tensor(std::span<const std::byte> bytes);

// ---- Side-stream copies -------------------------------------------------------------------------
// Copies between the compute device and pinned host memory, every one training makes (the stack's
// one CUDA copy path; `tierzero bench pcie` times it): on side streams, each ordered after the work
// queued so far on the device's current stream by an event (never a device-wide sync) and completing
// as a CopyDone, or on a DeviceQueue of their own. On a CPU "device" a side-stream copy is a memcpy
// done at once, so the same code runs, and is tested, without a GPU.

// A queued copy; as a ReaderFence (offload.h), the copy that still reads its host buffer.
class CopyDone : public ReaderFence {
 public:
  // Blocks the calling thread (any thread) until the copy has run: only its event, never the device.
  void wait_host() override = 0;
  // Makes work queued on the device's current stream from now on start after the copy; the host
  // does not block.
  virtual void order_current_stream() = 0;
  // Seconds the copy ran on its stream, once wait_host() returned; 0 unless timing is on.
  virtual double seconds() = 0;
};

// A write the host waits for as a CopyDone: `fence` (a RecordRing window's NVMe write; null: done
// already) is waited for by wait_host() and order_current_stream() alike; seconds() is 0.
std::shared_ptr<CopyDone> host_done(std::shared_ptr<ReaderFence> fence);

// How long the device's current stream sat idle while the host was blocked: a mark on the stream
// where its queued work ends, opened just before the host blocks, and one where new work starts,
// once it resumes; ~0 when the stream still had work queued then.
class IdleGap {
 public:
  virtual ~IdleGap() = default;
  // Marks where the host resumed (call once, on the thread that opened the gap).
  virtual void end() = 0;
  // Seconds between the marks; waits until the stream has passed end()'s mark.
  virtual double seconds() = 0;
};

// New device tensors and the copy that fills them (DeviceCopies::upload).
struct DeviceUpload {
  std::vector<at::Tensor> tensors;
  std::unique_ptr<CopyDone> done;
};

// A point in a DeviceQueue: everything queued on it before the mark (seconds() is 0). Its waits
// throw tierzero::Error with the queue's error (CUDA's, or a CPU "device"'s kernel's).
class QueueMark : public CopyDone {
 public:
  // Whether everything queued before the mark has run; never blocks.
  virtual bool ran() = 0;
};

// A stream of its own on the device for work the host queues in order and never waits on while
// queuing: copies between host memory and device memory, and kernels (DeviceCopies::queue). The
// offloaded optimizer's GPU share (engine/zero's device_share.h) uploads a sub-group's state, steps it
// there and downloads it on one while the CPU steps the others. Nothing on a queue is ordered with the
// compute stream or the side streams. On a CPU "device" a thread of the queue's own does the work in
// order (memcpy; the kernel's enqueue gets a null stream), so the same code runs, and is tested,
// without a GPU, overlapping the host's as it would a GPU's. Its calls throw tierzero::Error with
// CUDA's error.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // Queues a copy of `bytes` from host memory `src` (pinned, else CUDA copies it synchronously;
  // unchanged until the copy ran) to device memory `dst`.
  virtual void to_device(void* dst, const void* src, size_t bytes) = 0;
  // Queues a copy of `bytes` from device memory `src` to host memory `dst` (not read before the copy
  // ran).
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
  // Queues a kernel after what is queued: CUDA calls `enqueue` now with the queue's stream (a
  // cudaStream_t, its device current) and returns its status; a CPU "device" calls a copy of it on the
  // queue's thread, in turn, with nullptr, and returns ok (its error is thrown by the marks' waits).
  virtual Status launch(const std::function<Status(void* stream)>& enqueue) = 0;
  // A mark after everything queued so far.
  virtual std::unique_ptr<QueueMark> mark() = 0;
};

class DeviceCopies {
 public:
  // Side streams on `device` (CUDA: one device-to-host and one host-to-device stream from
  // LibTorch's pool); with `timing`, each copy also measures its time on its stream. Throws
  // tierzero::Error for a CUDA device in a build without CUDA.
  static std::unique_ptr<DeviceCopies> create(at::Device device, bool timing);
  virtual ~DeviceCopies() = default;
  // The device the copies reach.
  virtual at::Device device() const = 0;

  // Queues a copy of `src` (contiguous, on the device) into `dst` (src.nbytes() of pinned host
  // memory), after the work queued so far on the current stream (the reduction that wrote src).
  // The device memory of `src` is not reused by LibTorch's allocator before the copy has run.
  virtual std::unique_ptr<CopyDone> to_host(void* dst, const at::Tensor& src) = 0;
  // Queues a copy of `src` (dst.nbytes() of host memory: pinned, else CUDA copies it synchronously;
  // unchanged until the copy ran) into `dst` (contiguous, on the device), after the work queued so far
  // on the current stream; `dst`'s memory is not reused by LibTorch's allocator before the copy has run.
  virtual std::unique_ptr<CopyDone> to_device(const at::Tensor& dst, const void* src) = 0;
  // Queues copies of `src` (contiguous host tensors, as to_device's `src`) into new device tensors
  // like them, allocated in the current stream's order, after the work queued so far; their memory
  // is kept until the copies ran. Order the current stream after `done` before reading.
  virtual DeviceUpload upload(const std::vector<const at::Tensor*>& src) = 0;
  // Calls `enqueue` with the device's current stream set to the host-to-device side stream, so
  // what it queues (a collective over memory to_device() wrote) starts after the copies queued so
  // far without holding up the work on the real current stream. A CPU "device" just calls it.
  virtual void after_device_copies(const std::function<void()>& enqueue) = 0;
  // Opens an IdleGap on the device's current stream (for the time breakdown; CUDA events with
  // timing). A CPU "device" runs its work when queued: its gap is the host's wall time.
  virtual std::unique_ptr<IdleGap> open_idle_gap() = 0;
  // A new DeviceQueue on the device (CUDA: a non-blocking stream created for it, destroyed with it,
  // which waits for what is queued on it; CPU: a thread). It may outlive the DeviceCopies. Throws
  // tierzero::Error with CUDA's error.
  virtual std::unique_ptr<DeviceQueue> queue() = 0;
};

// `host` (a CPU tensor: a batch's token ids or targets) on `device`, queued on the device's current
// stream without the host waiting for the work queued there so far: staged through LibTorch's cached
// pinned host memory (from pageable memory CUDA would first wait for the stream). `host` itself for
// a CPU device.
at::Tensor inputs_to_device(const at::Tensor& host, at::Device device);

// Caps what LibTorch's caching allocator may hold on `device` at `bytes` (tierzero.gpu_memory_limit;
// 0 = no cap): an allocation past it fails with CUDA's out-of-memory error. Under a cap the
// allocator grows its segments in place (expandable segments) unless PYTORCH_CUDA_ALLOC_CONF or
// PYTORCH_ALLOC_CONF says otherwise: the window's grouped layers and the head's one-micro-batch
// logits free blocks of other sizes, which fixed segments could not reuse under the cap (an H100
// run of the 7.6B at 22.35 GiB failed with 12 GiB reserved and unallocated). kOutOfSpace naming the
// key, the bytes asked and the device's total when `bytes` exceeds the device; ok and nothing done
// for a CPU device.
Status limit_device_memory(at::Device device, uint64_t bytes);

// Bytes of memory `device` has in all (CUDA's total, the context included); 0 for a CPU device.
// Throws tierzero::Error when CUDA fails or the build has no CUDA.
uint64_t device_memory_bytes(at::Device device);

// ---- Pending writes -----------------------------------------------------------------------------
// The optimizer's copies of new 16-bit weights into the compute partition that the compute stream
// has not been ordered after yet: the partitioner orders it after a copy only just before it first
// reads an overlapping range, so layer 0's forward starts while the last sub-groups are on their way.

// A copy queued into elements [begin, begin + count) of a compute partition.
struct PartitionWrite {
  int64_t begin = 0;
  int64_t count = 0;
  std::shared_ptr<CopyDone> done;
};

class PendingWrites {
 public:
  // Adds `writes` to those pending.
  void add(std::vector<PartitionWrite> writes);
  // Orders the device's current stream after every pending write overlapping elements [begin, end)
  // (CopyDone::order_current_stream; the host does not wait) and forgets them.
  void order_range(int64_t begin, int64_t end);
  // The same for every pending write.
  void order_all();
  size_t size() const { return writes_.size(); }

 private:
  std::vector<PartitionWrite> writes_;
};

// ---- Copy measurements for `tierzero bench pcie` -------------------------------------------------
// Host <-> GPU copies timed two ways in one process: training's copy path (DeviceCopies) and plain
// cudaMemcpy, the peer, over the same buffers and chunk sizes.

enum class CopyDirection : uint8_t { kH2D, kD2H, kDuplex };
enum class HostMemoryKind : uint8_t { kPinned, kPageable };
enum class CopyMethod : uint8_t {
  kTierzero,    // DeviceCopies::to_device / to_host chunk by chunk, the pass done at its last chunk's event
  kCudaMemcpy,  // the peer: plain cudaMemcpy of chunk_bytes, back to back (duplex: two threads)
};

struct CopyMeasurement {
  uint64_t bytes = 0;  // bytes moved (duplex: both directions summed)
  double seconds = 0;
  bool verified = false;  // the destination equals the source, byte for byte
};

// Host and device buffers for timing copies between host and GPU.
class CopyProbe {
 public:
  // Allocates two pinned, two pageable and two device buffers of `bytes` each. kUnsupported with
  // a clear message when no CUDA GPU is present (or the build has no CUDA); kInvalidArgument for a
  // `cuda_device` that does not exist.
  static Result<std::unique_ptr<CopyProbe>> create(uint64_t bytes, int cuda_device = 0);
  virtual ~CopyProbe() = default;
  // "NVIDIA H200 (device 0, 139.81 GiB, PCI 25), CUDA runtime 13.0"
  virtual std::string device_description() const = 0;
  // Copies the whole buffer in `chunk_bytes` pieces `repeats` times after one warm-up pass, timed
  // by the host clock; verifies the last pass.
  virtual Result<CopyMeasurement> measure(CopyDirection direction, HostMemoryKind host, CopyMethod method,
                                          uint64_t chunk_bytes, int repeats) = 0;
};

}  // namespace tierzero::offload
