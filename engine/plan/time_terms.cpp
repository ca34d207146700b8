// Each resource's busy time for one optimizer step of one rank (plan.h: the overlap model).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "engine/plan/internal/model_params.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine::plan {
namespace {

// "BYTES B / RATE GB/s".
std::string bytes_over(double bytes, const MachineFigure& rate) {
  return fmt::format("{} B / {:.2f} GB/s", count_text(bytes), rate.value);
}

double seconds(double amount, double per_second) { return per_second > 0 ? amount / per_second : 0.0; }

// tierzero.gpu_optimizer_share: the elements the GPU steps (after the backward only; of the records
// with a home in pinned memory: all with the state in host memory, records_in_memory on NVMe).
double gpu_share_elements(const RunShape& s) {
  if (s.gpu_optimizer_share <= 0 || s.steps_in_backward) return 0.0;
  const double p = static_cast<double>(s.partition);
  const double homed = s.optimizer_nvme ? static_cast<double>(s.records().first_numel(s.records_in_memory)) : p;
  return std::min(homed, s.gpu_optimizer_share * p);
}

}  // namespace

std::vector<TimeTerm> time_terms(const ModelDims& model, const RunShape& s, const Machine& machine) {
  std::vector<TimeTerm> terms;
  const double tokens = static_cast<double>(s.micro) * s.seq * s.accum;
  // tierzero.lora: the base's weights take no gradients (the adapters' are negligible).
  const double per_token = flops_per_token(model, s.seq, /*weight_grads=*/!s.lora, s.kept_layers);
  const double flops = tokens * per_token;
  const double rate = machine.gpu_tflops.value * 1e12 * machine.compute_efficiency;
  const std::string kept =
      s.kept_layers > 0 ? ", " + std::to_string(s.kept_layers) + " layers not recomputed (tierzero.kept_activations)" : "";
  terms.push_back(
      {"gpu compute", seconds(flops, rate),
       fmt::format("{} tokens x {} FLOP/token ({} x matmul params + attention{}) / ({:.0f} TFLOPS x {:.2f})",
                   count_text(tokens), count_text(per_token), s.lora ? 6 : 8, kept, machine.gpu_tflops.value,
                   machine.compute_efficiency)});

  // H2D: updated weights after the step (offloaded optimizer); stage 3 offloaded parameters for
  // every gather, forward and backward, less those kept whole between them: once per micro-batch
  // each way, or with the window (window_pass.h) once for all the forwards and once for all the
  // backwards.
  const double e = s.compute_bytes, p = static_cast<double>(s.partition);
  // The GPU share's pieces cross each way: up their gradients, bf16 weights and record (compact
  // residual, moments, scales); down the weights and the record.
  const double shared = gpu_share_elements(s);
  const double shared_record = static_cast<double>(s.layout.record_bytes(static_cast<int64_t>(shared)));
  const double passes = s.forward_window ? 1.0 : static_cast<double>(s.accum);
  const double gathered = std::max(0.0, 2.0 * passes * p - passes * static_cast<double>(s.kept_gathered) / s.world);
  double h2d = s.optimizer_offloaded ? e * p : 0.0;
  if (s.params_offloaded()) h2d += e * gathered;
  h2d += shared * (s.host_grad_bytes + 2) + shared_record;
  // tierzero.lora's base in host memory: every unit copied for each forward pass and its
  // recomputation in the backward: once per micro-batch, or once per step with the window (a unit
  // asked for again in a row is not copied again: frozen_prefetch.h).
  if (s.lora && s.params_cpu) h2d += e * 2.0 * passes * static_cast<double>(s.frozen_parameters);
  terms.push_back({"pcie h2d", seconds(h2d, machine.h2d_gbps.value * 1e9), bytes_over(h2d, machine.h2d_gbps)});
  // D2H: the reduced gradient partition lands in host memory: each micro-batch's in the grad dtype,
  // or once per step (the device accumulator, the window) as fp32 sums; bf16 with
  // tierzero.offload_grad_dtype, rounded as it crosses.
  double d2h = 0.0;
  if (s.optimizer_offloaded) {
    const bool once = s.grads_land_once();
    const double bytes = s.host_grad_bytes == 2 ? 2.0 : (once && s.accum > 1 ? 4.0 : s.grad_bytes);
    d2h = (once ? 1.0 : static_cast<double>(s.accum)) * bytes * p;
  }
  d2h += shared * 2 + shared_record;
  terms.push_back({"pcie d2h", seconds(d2h, machine.d2h_gbps.value * 1e9), bytes_over(d2h, machine.d2h_gbps)});

  // The CPU Adam moves each of its parameters' bytes once (Layout::cpu_step_bytes) at the host
  // memory rate bench adam measured.
  const double adam = s.optimizer_offloaded ? p - shared : 0.0;
  const double step_bytes = s.layout.cpu_step_bytes(s.host_grad_bytes);
  terms.push_back({"cpu adam", seconds(adam * step_bytes, machine.adam_gbps.value * 1e9),
                   fmt::format("{} params x {:.2f} B / {:.1f} GB/s ({:.2f} Gparam/s){}", count_text(adam), step_bytes,
                               machine.adam_gbps.value, machine.adam_gbps.value / step_bytes,
                               shared > 0 ? " (the rest on the GPU: tierzero.gpu_optimizer_share)" : "")});

  // NVMe: the optimizer records neither in memory nor kept by the swap buffers, read and written
  // once per step (engine/layout/layout.h); parameters
  // on NVMe read for every gather (as H2D above) beyond the share offload_param.max_in_cpu keeps in
  // memory, written once after the step.
  double read = static_cast<double>(s.nvme_state_moved_bytes), write = read;
  // tierzero.lora's base on NVMe: every unit read for each pass that copies it to the GPU (above).
  if (s.frozen_nvme) read += e * 2.0 * passes * static_cast<double>(s.frozen_parameters);
  if (s.params_nvme) {
    const double on_disk = p > 0 ? static_cast<double>(s.partition - s.params_in_cpu) / p : 0.0;
    read += e * gathered * on_disk;
    write += e * p * on_disk;
  }
  // The disk serves the step one direction at a time, so reads and writes add up: each at bench io's
  // (or bench tiers') rate for that direction. The optimizer's records are read ahead and written
  // behind a record at a time, so the disk switches direction per record rather than per request,
  // and what it does in a step is whole runs of reads and of writes: on the GPU box 3.6 % of the busy
  // time had both in flight (benchmarks/disk_inflight.py; RESULTS.md, the fifth lease of
  // 2026-12-06). bench io --mixed's row (one request of each in turn) times a pattern the engine does
  // not make, and bench io --pipeline's spread pass, the same calls as the step's, ran at 1.09x,
  // 1.29x and 1.45x its own serial bound on three leases of one box, the last one's steps at 1.145x
  // the serial bound: one short pass is not a rate, so neither prices the step. Not in the term: the
  // disk running slower under a step's sustained traffic than in bench io's short rows (design.md,
  // "The planner": 1.10x to 1.31x on those leases).
  terms.push_back(
      {"nvme", seconds(read, machine.nvme_read_gbps.value * 1e9) + seconds(write, machine.nvme_write_gbps.value * 1e9),
       fmt::format("read {} / {:.2f} GB/s + write {} / {:.2f} GB/s (one direction at a time)", count_text(read),
                   machine.nvme_read_gbps.value, count_text(write), machine.nvme_write_gbps.value)});
  return terms;
}

namespace {

// The seconds of the term named `what` in `terms` (0 when absent).
double term_seconds(const std::vector<TimeTerm>& terms, std::string_view what) {
  for (const TimeTerm& t : terms)
    if (t.what == what) return t.seconds;
  return 0.0;
}

double optimizer_seconds(const std::vector<TimeTerm>& terms) {
  return std::max(term_seconds(terms, "cpu adam"), term_seconds(terms, "nvme"));
}

}  // namespace

double followed_step_seconds(const std::vector<TimeTerm>& terms) {
  const double gpu = term_seconds(terms, "gpu compute");
  return std::max(kForwardShare * gpu, optimizer_seconds(terms)) + (1.0 - kForwardShare) * gpu;
}

double in_backward_step_seconds(const std::vector<TimeTerm>& terms) {
  const double gpu = term_seconds(terms, "gpu compute");
  return kForwardShare * gpu + std::max((1.0 - kForwardShare) * gpu, optimizer_seconds(terms));
}

}  // namespace tierzero::engine::plan
