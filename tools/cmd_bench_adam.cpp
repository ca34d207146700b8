// `tierzero bench adam`: the cpu_adam step's Gparam/s and effective memory bandwidth, next to the
// machine's STREAM copy/triad bandwidth and PyTorch's fused CPU AdamW on the same data, measured
// in the same run on the same threads, over a thread sweep. Params are fp32 masters (with an
// optional 16-bit copy) or 16-bit params updated in place (--param-dtype bf16, DeepSpeed's mode), or
// the exact compact master (--master compact: bf16 params + int16 residual); moments fp32, bf16 or
// 8-bit blockwise (--moments int8: i8 m, u8 v, an fp32 scale per 256).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "tools/bench_adam_gpu.h"
#include "tools/bench_adam_memory.h"
#include "tools/bench_adam_stream.h"
#include "tools/bench_adam_torch.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

// A --*-dtype value: one of the types the kernels take, in any of parse_element_type()'s spellings.
ElementType parse_kernel_type(const std::string& text) {
  const std::optional<ElementType> type = parse_element_type(text);
  if (type != ElementType::kF32 && type != ElementType::kBF16 && type != ElementType::kF16) {
    throw Error(invalid_argument("unknown element type '" + text + "': use fp32, bf16 or fp16"));
  }
  return *type;
}

struct BenchAdamFlags {
  uint64_t params = uint64_t{1} << 26;
  int threads = 0;
  bool sweep = true;
  bool pin = false;
  bool streaming_stores = false;
  int steps = 10;
  size_t tile_elements = cpu_adam::CpuAdamOptions{}.tile_elements;
  std::string param_dtype = "fp32";
  std::string grad_dtype = "bf16";
  std::string state_dtype = "fp32";
  std::string params16_dtype;   // empty: bf16 with fp32 params, none with 16-bit params
  std::string master = "fp32";  // fp32 | compact (bf16 params + int16 residual, AdamBuffers::master_residual)
  std::string json;
  std::string save_params;
};

// Element types of one configuration and the bytes each implementation moves per param.
struct Layout {
  ElementType params, grads, state;  // compact: params kBF16 (the hi); 8-bit moments: state kI8 (v is kU8)
  bool write16;
  ElementType params16;
  bool compact = false;  // params is the bf16 hi of an exact compact master, plus an int16 residual
  bool eight = false;    // 8-bit blockwise moments

  bool params_16bit() const { return params != ElementType::kF32 && !compact; }
  // Bytes of one param's master (compact: hi + residual) and of one moment (8-bit: code + scale share).
  double param_bytes() const { return compact ? 4.0 : element_size(params); }
  double moment_bytes() const { return eight ? 1.0 + 4.0 / cpu_adam::kMomentBlock : element_size(state); }
  double buffer_bytes() const {
    return param_bytes() + element_size(grads) + 2 * moment_bytes() + (write16 ? element_size(params16) : 0);
  }
  // Read p, g, m, v; write p, m, v and the 16-bit copy: each byte once.
  double tierzero_bytes() const {
    const double p = param_bytes(), g = element_size(grads), s = moment_bytes();
    return (p + g + 2 * s) + (p + 2 * s) + (write16 ? element_size(params16) : 0);
  }
  // The peer: optional casts in (16-bit params and grads -> fp32: read 2, write 4), the fp32 step
  // (read p, g, m, v; write p, m, v) and the optional cast out (fp32 params -> 16-bit; with a compact
  // master the peer keeps an fp32 master and writes a bf16 copy; 8-bit moments: fp32 moments).
  double torch_bytes() const {
    const double cast_params = params_16bit() ? 2 * (element_size(params) + 4) : 0;
    const double cast_in = grads == ElementType::kF32 ? 0 : element_size(grads) + 4;
    const double cast_out = write16 ? 4 + element_size(params16) : compact ? 6 : 0;
    return cast_params + cast_in + 28 + cast_out;
  }
};

// The value of element i of a buffer of `type`.
float value_at(const void* data, ElementType type, size_t i) {
  if (type == ElementType::kF32) return static_cast<const float*>(data)[i];
  const uint16_t bits = static_cast<const uint16_t*>(data)[i];
  if (type == ElementType::kBF16) return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}

// Every buffer of the run, first touched by the threads that use them. The roofline pass
// (CpuAdam::memory_pass) gets buffers of its own, of tierzero's sizes: it leaves the steps' data alone.
struct BenchBuffers {
  BenchBuffers(const Layout& l, size_t n)
      : params(element_size(l.params) * n),
        grads(element_size(l.grads) * n),
        exp_avg(element_size(l.state) * n),
        exp_avg_sq(element_size(l.state) * n),
        params16(2 * n),
        torch_params(4 * n),
        torch_grads32(l.grads == ElementType::kF32 ? 0 : 4 * n),
        torch_exp_avg(4 * n),
        torch_exp_avg_sq(4 * n),
        torch_params16(2 * n),
        stream_a(4 * n),
        stream_b(4 * n),
        stream_c(4 * n),
        roof_params(element_size(l.params) * n),
        roof_grads(element_size(l.grads) * n),
        roof_exp_avg(element_size(l.state) * n),
        roof_exp_avg_sq(element_size(l.state) * n),
        roof_params16(l.write16 ? 2 * n : 0),
        residual(l.compact ? 2 * n : 0),
        exp_avg_scales(l.eight ? 4 * cpu_adam::moment_block_count(n) : 0),
        exp_avg_sq_scales(l.eight ? 4 * cpu_adam::moment_block_count(n) : 0),
        roof_residual(l.compact ? 2 * n : 0),
        roof_exp_avg_scales(l.eight ? 4 * cpu_adam::moment_block_count(n) : 0),
        roof_exp_avg_sq_scales(l.eight ? 4 * cpu_adam::moment_block_count(n) : 0) {}
  HostArray params, grads, exp_avg, exp_avg_sq, params16;
  // torch_params16: the peer's 16-bit copy, or its 16-bit params (then torch_params is fp32 scratch).
  HostArray torch_params, torch_grads32, torch_exp_avg, torch_exp_avg_sq, torch_params16;
  HostArray stream_a, stream_b, stream_c;
  HostArray roof_params, roof_grads, roof_exp_avg, roof_exp_avg_sq, roof_params16;
  // Compact master residuals and 8-bit moment scales (empty otherwise), the step's and the roofline's.
  HostArray residual{0}, exp_avg_scales{0}, exp_avg_sq_scales{0};
  HostArray roof_residual{0}, roof_exp_avg_scales{0}, roof_exp_avg_sq_scales{0};
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Lets spinning OpenMP / TBB workers of the previous measurement go to sleep.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

class BenchAdam {
 public:
  explicit BenchAdam(const BenchAdamFlags& flags) : flags_(flags), report_("tierzero bench adam") {}

  void run() {
    parse_layout();
    n_ = flags_.params;
    if (n_ == 0) throw Error(invalid_argument("--params must be at least 1"));
    if (flags_.steps < 1) throw Error(invalid_argument("--steps must be at least 1"));
    const int max_threads = flags_.threads > 0 ? flags_.threads : cpu_adam::CpuAdam().threads();
    buffers_ = std::make_unique<BenchBuffers>(layout_, n_);
    initialise(max_threads);
    Result<std::unique_ptr<TorchAdamPeer>> peer = make_torch_adam_peer(peer_buffers());
    if (peer.ok()) peer_ = std::move(peer).value();
    begin_report(max_threads);
    bool all_correct = true;
    for (int threads : thread_counts(max_threads)) all_correct &= measure(threads);
    if (layout_.compact && layout_.eight) all_correct &= measure_gpu();
    if (!flags_.save_params.empty()) save_params();
    finish(all_correct);
  }

 private:
  void parse_layout() {
    layout_.params = parse_kernel_type(flags_.param_dtype);
    layout_.grads = parse_kernel_type(flags_.grad_dtype);
    layout_.eight = flags_.state_dtype == "int8" || flags_.state_dtype == "i8" || flags_.state_dtype == "8bit";
    layout_.state = layout_.eight ? ElementType::kI8 : parse_kernel_type(flags_.state_dtype);
    if (layout_.state == ElementType::kF16) {
      throw Error(invalid_argument("--moments / --state-dtype must be fp32, bf16 or int8"));
    }
    if (layout_.eight && flags_.streaming_stores) {
      throw Error(
          invalid_argument("--streaming-stores with --moments int8: cpu_adam writes 8-bit moments with ordinary "
                           "stores (it streams fp32 and 16-bit state only); drop --streaming-stores"));
    }
    if (flags_.master != "fp32" && flags_.master != "compact") {
      throw Error(invalid_argument("--master must be fp32 or compact, got '" + flags_.master + "'"));
    }
    if (flags_.master == "compact") {
      if (layout_.params != ElementType::kF32) {
        throw Error(invalid_argument("--master compact keeps an fp32 master (in bf16 + int16): drop --param-dtype"));
      }
      if (!flags_.params16_dtype.empty() && flags_.params16_dtype != "none") {
        throw Error(invalid_argument("--master compact: the bf16 params are the 16-bit copy; drop --params16-dtype"));
      }
      layout_.compact = true;
      layout_.params = ElementType::kBF16;
      layout_.write16 = false;
      layout_.params16 = ElementType::kBF16;
      return;
    }
    const std::string params16 =
        flags_.params16_dtype.empty() ? (layout_.params_16bit() ? "none" : "bf16") : flags_.params16_dtype;
    layout_.write16 = params16 != "none";
    layout_.params16 = layout_.write16 ? parse_kernel_type(params16) : ElementType::kBF16;
    if (layout_.params16 == ElementType::kF32)
      throw Error(invalid_argument("--params16-dtype must be bf16, fp16 or none"));
    if (layout_.params_16bit() && layout_.write16) {
      throw Error(invalid_argument("--params16-dtype " + params16 + " with --param-dtype " + flags_.param_dtype +
                                   ": 16-bit params are their own copy; drop --params16-dtype or pass none"));
    }
  }

  std::vector<int> thread_counts(int max_threads) const {
    std::vector<int> counts;
    if (flags_.sweep) {
      for (int t = 1; t < max_threads; t *= 2) counts.push_back(t);
    }
    counts.push_back(max_threads);
    return counts;
  }

  // Same initial params for both implementations, zero moments, fixed gradients; the STREAM and
  // roofline buffers in [1, 2).
  void initialise(int threads) {
    BenchBuffers& b = *buffers_;
    // Zeroed first: a compact master's split below writes the residual.
    for (HostArray* zero : {&b.residual, &b.exp_avg_scales, &b.exp_avg_sq_scales, &b.roof_residual,
                            &b.roof_exp_avg_scales, &b.roof_exp_avg_sq_scales}) {
      parallel_ranges(threads, zero->bytes(), [&](size_t begin, size_t end) {
        std::fill(zero->as<char>() + begin, zero->as<char>() + end, 0);
      });
    }
    if (layout_.compact) {
      // The same fp32 master for both: drawn in fp32, split into hi and residual for tierzero.
      fill_uniform(threads, b.torch_params.data(), ElementType::kF32, n_, 1, -1.0f, 1.0f);
      parallel_ranges(threads, n_, [&](size_t begin, size_t end) {
        throw_if_error(cpu_adam::split_master(std::span<const float>(b.torch_params.as<float>() + begin, end - begin),
                                              std::span<uint16_t>(b.params.as<uint16_t>() + begin, end - begin),
                                              std::span<int16_t>(b.residual.as<int16_t>() + begin, end - begin)));
      });
    } else {
      fill_uniform(threads, b.params.data(), layout_.params, n_, 1, -1.0f, 1.0f);
      fill_uniform(threads, layout_.params_16bit() ? b.torch_params16.data() : b.torch_params.data(), layout_.params,
                   n_, 1, -1.0f, 1.0f);
    }
    fill_uniform(threads, b.grads.data(), layout_.grads, n_, 2, -1.0f, 1.0f);
    for (HostArray* zero :
         {&b.exp_avg, &b.exp_avg_sq, &b.params16, &b.torch_grads32, &b.torch_exp_avg, &b.torch_exp_avg_sq,
          layout_.params_16bit() ? &b.torch_params : &b.torch_params16, &b.roof_params16}) {
      parallel_ranges(threads, zero->bytes(), [&](size_t begin, size_t end) {
        std::fill(zero->as<char>() + begin, zero->as<char>() + end, 0);
      });
    }
    for (HostArray* ones : {&b.stream_a, &b.stream_b, &b.stream_c}) {
      fill_uniform(threads, ones->data(), ElementType::kF32, n_, 3, 1.0f, 2.0f);
    }
    fill_uniform(threads, b.roof_params.data(), layout_.params, n_, 4, 1.0f, 2.0f);
    fill_uniform(threads, b.roof_grads.data(), layout_.grads, n_, 5, 1.0f, 2.0f);
    if (layout_.eight) {  // codes 0, scales 0: the pass decodes, adds g and encodes with the new absmax
      for (HostArray* zero : {&b.roof_exp_avg, &b.roof_exp_avg_sq}) {
        parallel_ranges(threads, zero->bytes(), [&](size_t begin, size_t end) {
          std::fill(zero->as<char>() + begin, zero->as<char>() + end, 0);
        });
      }
    } else {
      fill_uniform(threads, b.roof_exp_avg.data(), layout_.state, n_, 6, 1.0f, 2.0f);
      fill_uniform(threads, b.roof_exp_avg_sq.data(), layout_.state, n_, 7, 1.0f, 2.0f);
    }
    init_shadow();
  }

  // The self-check: a prefix of the problem stepped by cpu_adam's fp32-master path in lockstep with the
  // timed steps (outside the timing). Compact master: with the same moments and a kNearestAway bf16
  // copy, it must match bit for bit (rebuilt master == fp32 master, hi == copy). 8-bit moments: with
  // fp32 moments; the column shows max |p_8bit - p_fp32|.
  void init_shadow() {
    if (!layout_.compact && !layout_.eight) return;
    const size_t n = shadow_count();
    shadow_params_.resize(n);
    shadow_params16_.assign(n, 0);
    const bool eight_shadow = layout_.compact && layout_.eight;
    shadow_m_.assign(layout_.compact ? n * element_size(layout_.state) : 4 * n, 0);
    shadow_v_.assign(shadow_m_.size(), 0);
    shadow_m_scales_.assign(eight_shadow ? cpu_adam::moment_block_count(n) : 0, 0.0f);
    shadow_v_scales_.assign(shadow_m_scales_.size(), 0.0f);
    for (size_t i = 0; i < n; ++i) shadow_params_[i] = master_at(i);
  }

  size_t shadow_count() const { return std::min<size_t>(n_, size_t{1} << 20); }

  // tierzero's param i as fp32 (a compact master rebuilt).
  float master_at(size_t i) const {
    if (!layout_.compact) return value_at(buffers_->params.data(), layout_.params, i);
    float master;
    throw_if_error(cpu_adam::join_master(std::span<const uint16_t>(buffers_->params.as<uint16_t>() + i, 1),
                                         std::span<const int16_t>(buffers_->residual.as<int16_t>() + i, 1),
                                         std::span<float>(&master, 1)));
    return master;
  }

  void step_shadow(const cpu_adam::AdamHyperParams& hp) {
    if (shadow_params_.empty()) return;
    const size_t n = shadow_count();
    const ElementType state = layout_.compact ? layout_.state : ElementType::kF32;
    const ElementType v_state = state == ElementType::kI8 ? ElementType::kU8 : state;
    cpu_adam::AdamBuffers b{
        shadow_params_,
        {buffers_->grads.data(), n, layout_.grads},
        {shadow_m_.data(), n, state},
        {shadow_v_.data(), n, v_state},
        layout_.compact ? cpu_adam::Elements{shadow_params16_.data(), n, ElementType::kBF16} : cpu_adam::Elements{},
        {}};
    b.params16_rounding = cpu_adam::Bf16Rounding::kNearestAway;
    b.exp_avg_scales = shadow_m_scales_;
    b.exp_avg_sq_scales = shadow_v_scales_;
    throw_if_error(shadow_adam_.step(hp, step_number_, 1.0f, b));
  }

  // The self-check column: "n/a" without one, "exact" / "DIFF" (compact), or max |dp| (8-bit moments).
  std::string shadow_result(bool& ok) const {
    if (shadow_params_.empty()) return "n/a";
    const size_t n = shadow_count();
    if (layout_.compact) {
      for (size_t i = 0; i < n; ++i) {
        if (std::bit_cast<uint32_t>(master_at(i)) != std::bit_cast<uint32_t>(shadow_params_[i]) ||
            buffers_->params.as<uint16_t>()[i] != shadow_params16_[i]) {
          ok = false;
          return "DIFF";
        }
      }
      return "exact";
    }
    // 8-bit codes err by up to 2^-4 of each m and v: most updates by a few % of lr. Params whose gradient
    // is below the m code's range in their block (2^-17 of the absmax) stop where Adam's normalised
    // update moves them by up to lr: the max can reach lr per step, the RMS stays small.
    double max_dp = 0, sum_sq = 0;
    for (size_t i = 0; i < n; ++i) {
      const double d = std::fabs(double{master_at(i)} - shadow_params_[i]);
      max_dp = std::max(max_dp, d);
      sum_sq += d * d;
    }
    const double rms = std::sqrt(sum_sq / static_cast<double>(n));
    const double drift = hyper_params().lr * static_cast<double>(step_number_);
    if (!(rms <= 0.05 * drift && max_dp <= 2 * drift)) ok = false;
    return fmt_diff(rms);
  }

  // cpu_adam's view of a run's buffers: `params` fp32 masters or 16-bit params, per the layout.
  cpu_adam::AdamBuffers adam_buffers(const HostArray& params, const HostArray& grads, const HostArray& exp_avg,
                                     const HostArray& exp_avg_sq, const HostArray& params16, const HostArray& residual,
                                     const HostArray& m_scales, const HostArray& v_scales) const {
    const bool p16 = layout_.params_16bit() || layout_.compact;
    const ElementType v_state = layout_.eight ? ElementType::kU8 : layout_.state;
    cpu_adam::AdamBuffers b{
        p16 ? std::span<float>() : std::span<float>(params.as<float>(), n_),
        {grads.data(), n_, layout_.grads},
        {exp_avg.data(), n_, layout_.state},
        {exp_avg_sq.data(), n_, v_state},
        layout_.write16 ? cpu_adam::Elements{params16.data(), n_, layout_.params16} : cpu_adam::Elements{},
        p16 ? cpu_adam::Elements{params.data(), n_, layout_.params} : cpu_adam::Elements{}};
    if (layout_.compact) b.master_residual = std::span<int16_t>(residual.as<int16_t>(), n_);
    if (layout_.eight) {
      b.exp_avg_scales = std::span<float>(m_scales.as<float>(), cpu_adam::moment_block_count(n_));
      b.exp_avg_sq_scales = std::span<float>(v_scales.as<float>(), cpu_adam::moment_block_count(n_));
    }
    return b;
  }

  cpu_adam::AdamBuffers tierzero_buffers() const {
    const BenchBuffers& b = *buffers_;
    return adam_buffers(b.params, b.grads, b.exp_avg, b.exp_avg_sq, b.params16, b.residual, b.exp_avg_scales,
                        b.exp_avg_sq_scales);
  }

  cpu_adam::AdamBuffers roofline_buffers() const {
    const BenchBuffers& b = *buffers_;
    return adam_buffers(b.roof_params, b.roof_grads, b.roof_exp_avg, b.roof_exp_avg_sq, b.roof_params16,
                        b.roof_residual, b.roof_exp_avg_scales, b.roof_exp_avg_sq_scales);
  }

  TorchPeerBuffers peer_buffers() const {
    const BenchBuffers& b = *buffers_;
    return {b.torch_params.as<float>(),
            {b.grads.data(), n_, layout_.grads},
            b.torch_grads32.as<float>(),
            b.torch_exp_avg.as<float>(),
            b.torch_exp_avg_sq.as<float>(),
            layout_.write16 || layout_.compact ? cpu_adam::Elements{b.torch_params16.data(), n_, layout_.params16}
                                               : cpu_adam::Elements{},
            layout_.params_16bit() ? cpu_adam::Elements{b.torch_params16.data(), n_, layout_.params}
                                   : cpu_adam::Elements{}};
  }

  // Writes tierzero's params after the last step, raw in their element type, to --save-params.
  // A compact master is written as its fp32 master, rebuilt.
  void save_params() const {
    std::ofstream out(flags_.save_params, std::ios::binary);
    if (layout_.compact) {
      std::vector<float> chunk;
      for (size_t i = 0; i < n_; ++i) chunk.push_back(master_at(i));
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(4 * n_));
    } else {
      out.write(buffers_->params.as<char>(), static_cast<std::streamsize>(element_size(layout_.params) * n_));
    }
    if (!out)
      throw Error(io_error("cannot write --save-params " + flags_.save_params + ": check the path and free space"));
  }

  void begin_report(int max_threads) {
    report_.param("params", std::to_string(n_) + " (" +
                                format_bytes(static_cast<uint64_t>(layout_.buffer_bytes() * n_)) +
                                " of tierzero buffers: params, grads, m, v, 16-bit copy)");
    const std::string params =
        layout_.compact          ? "compact fp32 master (bf16 params, ties away, + int16 residual; exact)"
        : layout_.params_16bit() ? std::string(element_type_name(layout_.params)) + " updated in place (no fp32 master)"
                                 : "fp32 master";
    const std::string state = layout_.eight ? std::string("8-bit blockwise (i8 m, u8 v, an fp32 scale per ") +
                                                  std::to_string(cpu_adam::kMomentBlock) + ")"
                                            : std::string(element_type_name(layout_.state));
    report_.param("dtypes", "params " + params + ", grads " + element_type_name(layout_.grads) + ", state (m, v) " +
                                state + ", 16-bit copy " +
                                (layout_.write16   ? element_type_name(layout_.params16)
                                 : layout_.compact ? "the bf16 params"
                                                   : "none"));
    report_.param("bytes/param", "tierzero " + fixed(layout_.tierzero_bytes(), 0) + " (one fused pass), torch " +
                                     fixed(layout_.torch_bytes(), 0) + " (cast passes included)");
    report_.param("optimizer", "AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, bias correction");
    report_.param("tierzero", "cpu_adam, Highway target " + cpu_adam::simd_target_name() + ", oneTBB arena, tiles of " +
                                  std::to_string(flags_.tile_elements) + " elements" +
                                  (flags_.streaming_stores ? ", streaming (non-temporal) fp32 stores" : "") +
                                  (flags_.pin ? ", threads pinned to cores" : ", threads not pinned"));
    const std::string peer_params = layout_.params_16bit()
                                        ? " (16-bit params widened to fp32 scratch and rounded back with copy_: "
                                          "_fused_adamw_ on CPU needs params and state of one dtype)"
                                        : "";
    report_.param("peer",
                  peer_ ? torch_peer_description() + peer_params : torch_peer_description() + ": no peer column");
    report_.param("stream", "copy c=a (8 B/float), triad a=b+s*c (12 B/float), " + std::to_string(n_) +
                                " floats per array; roof: CpuAdam::memory_pass, the step's loads, conversions and "
                                "stores with p, m, v += g for Adam's arithmetic (" +
                                fixed(layout_.tierzero_bytes(), 0) + " B/param, own buffers); same threads");
    report_.param("timing", "median of " + std::to_string(flags_.steps) +
                                " rounds of (copy, triad, roof, tierzero step, torch step; the two steps in turns "
                                "first) after one warm-up round; threads up to " +
                                std::to_string(max_threads));
    report_.param("vs_torch", "torch time / tierzero time of the medians; round_ratio: median of the per-round ratios");
    report_.param("max_abs_dp", "max |p_tierzero - p_torch| after every step so far, same grads and hyper-parameters");
    report_.param("self_check",
                  layout_.compact ? "the first " + std::to_string(shadow_count()) +
                                        " params stepped by cpu_adam's fp32-master path with the same moments and a "
                                        "ties-away bf16 copy: 'exact' when master and bf16 match bit for bit"
                  : layout_.eight ? "RMS of p_8bit - p_fp32 moments over the first " + std::to_string(shadow_count()) +
                                        " params, stepped by cpu_adam with fp32 moments (ok: RMS <= 0.05 lr * step "
                                        "and max <= 2 lr * step)"
                                  : "n/a (no compact master or 8-bit moments)");
    report_.begin({{"threads", 7},
                   {"Gparam/s", 9, 3},
                   {"GB/s", 7, 2},
                   {"torch_Gp/s", 10, 3},
                   {"torch_GB/s", 10, 2},
                   {"vs_torch", 8, 2},
                   {"round_ratio", 11, 2},
                   {"copy_GB/s", 9, 2},
                   {"triad_GB/s", 10, 2},
                   {"%copy", 6, 1},
                   {"roof_GB/s", 9, 2},
                   {"%roof", 6, 1},
                   {"torch_%roof", 11, 1},
                   {"max_abs_dp", 10},
                   {"self_check", 10},
                   {"ok", 4}});
  }

  static std::string fixed(double v, int decimals) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
  }

  cpu_adam::AdamHyperParams hyper_params() const {
    cpu_adam::AdamHyperParams hp;
    hp.lr = 1e-3;
    hp.weight_decay = 0.01;
    return hp;
  }

  // One row: STREAM copy, triad, the roofline pass, a tierzero step and a torch step, in turn, on
  // `threads` threads, so that load from other processes affects every figure alike.
  bool measure(int threads) {
    BenchBuffers& b = *buffers_;
    StreamPasses stream(threads, b.stream_a.as<float>(), b.stream_b.as<float>(), b.stream_c.as<float>(), n_);
    const cpu_adam::CpuAdam adam({.threads = threads,
                                  .pin_threads = flags_.pin,
                                  .tile_elements = flags_.tile_elements,
                                  .streaming_stores = flags_.streaming_stores});
    if (peer_) peer_->set_threads(threads);
    const cpu_adam::AdamHyperParams hp = hyper_params();
    std::vector<double> ours, theirs, round_ratios, copy, triad, roof;
    for (int i = 0; i <= flags_.steps; ++i) {  // the first round is a warm-up
      settle();
      const double copy_rate = stream.copy();
      const double triad_rate = stream.triad();
      const auto roof_start = std::chrono::steady_clock::now();
      throw_if_error(adam.memory_pass(roofline_buffers()));
      const double roof_rate = layout_.tierzero_bytes() * static_cast<double>(n_) / seconds_since(roof_start);
      ++step_number_;
      const auto ours_step = [&] {
        settle();
        const auto start = std::chrono::steady_clock::now();
        throw_if_error(adam.step(hp, step_number_, 1.0f, tierzero_buffers()));
        const double seconds = seconds_since(start);
        step_shadow(hp);
        return seconds;
      };
      const auto their_step = [&] {
        if (!peer_) return double{NAN};
        settle();
        const auto start = std::chrono::steady_clock::now();
        peer_->step(hp, step_number_);
        return seconds_since(start);
      };
      double our_seconds, their_seconds;
      if (i % 2 == 0) {
        our_seconds = ours_step();
        their_seconds = their_step();
      } else {
        their_seconds = their_step();
        our_seconds = ours_step();
      }
      if (i == 0) continue;
      copy.push_back(copy_rate);
      triad.push_back(triad_rate);
      roof.push_back(roof_rate);
      ours.push_back(our_seconds);
      theirs.push_back(their_seconds);
      round_ratios.push_back(their_seconds / our_seconds);
    }
    const double t = median(ours);
    const double gparams = n_ / t / 1e9;
    const double gbps = layout_.tierzero_bytes() * n_ / t / 1e9;
    const double torch_gparams = peer_ ? n_ / median(theirs) / 1e9 : NAN;
    const double max_dp = peer_ ? max_abs_param_diff(threads) : NAN;
    bool ok = !peer_ || max_dp <= param_tolerance();
    const std::string self_check = shadow_result(ok);
    const double copy_gbps = median(copy) / 1e9;
    const double roof_gbps = median(roof) / 1e9;
    const double torch_gbps = torch_gparams * layout_.torch_bytes();
    report_.row({int64_t{threads}, gparams, gbps, torch_gparams, torch_gbps, gparams / torch_gparams,
                 peer_ ? median(round_ratios) : NAN, copy_gbps, median(triad) / 1e9, 100 * gbps / copy_gbps, roof_gbps,
                 100 * gbps / roof_gbps, 100 * torch_gbps / roof_gbps, peer_ ? fmt_diff(max_dp) : std::string("n/a"),
                 self_check, std::string(ok ? "OK" : "FAIL")});
    last_ = {threads,   gparams,  gbps, torch_gparams, torch_gbps, peer_ ? median(round_ratios) : NAN,
             copy_gbps, roof_gbps};
    return ok;
  }

  // The GPU line of the compact master with 8-bit moments (step_on_gpu on a copy of the state after the
  // sweep): "none (why)" without CUDA or a device; false when its bytes differ from step_portable's.
  bool measure_gpu() {
    const Result<GpuAdamRates> gpu = measure_gpu_adam(tierzero_buffers(), hyper_params(), flags_.steps);
    if (!gpu.ok()) {
      report_.summary("gpu", "none (" + gpu.status().message() + ")");
      return gpu.status().code() == ErrorCode::kUnsupported;
    }
    report_.summary("gpu", gpu->device + ": kernel " + fixed(gpu->kernel_gparams, 2) + " Gparam/s on resident state; " +
                               fixed(gpu->pcie_gparams, 2) + " Gparam/s with the state and grads up (" +
                               fixed(gpu->h2d_bytes_per_param, 2) + " B/param) and the state down (" +
                               fixed(gpu->d2h_bytes_per_param, 2) + " B/param) from pinned memory; bytes " +
                               (gpu->exact ? "equal step_portable's (exact)" : "DIFFER from step_portable's"));
    return gpu->exact;
  }

  static std::string fmt_diff(double d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", d);
    return buf;
  }

  // fp32 state: tierzero does torch's float operations (bit-identical with FMA, a few ulp without);
  // bf16 state: m and v are stored in bf16, so each step's update may differ by about 1% of lr.
  // 16-bit params: the same float result rounded once per step, so at most one 16-bit ulp of
  // |p| <= 2 (2^-7 bf16, 2^-10 fp16) where a few-ulp float difference crossed a rounding boundary.
  // 8-bit moments: the max over many params includes some whose m is below the code's range in
  // their block; they stop where the fp32 step moves them by up to lr (see shadow_result): 2 lr a step.
  double param_tolerance() const {
    const double state = layout_.state == ElementType::kF32 ? 1e-6
                         : layout_.eight                    ? 2 * hyper_params().lr * static_cast<double>(step_number_)
                                         : 0.02 * hyper_params().lr * static_cast<double>(step_number_);
    if (!layout_.params_16bit()) return state;
    return state + (layout_.params == ElementType::kBF16 ? 0x1p-7 : 0x1p-10);
  }

  double max_abs_param_diff(int threads) const {
    const void* ours = buffers_->params.data();
    const void* theirs = layout_.params_16bit() ? buffers_->torch_params16.data() : buffers_->torch_params.data();
    std::mutex mu;
    double max_diff = 0;
    parallel_ranges(threads, n_, [&](size_t begin, size_t end) {
      double m = 0;
      for (size_t i = begin; i < end; ++i) {
        const double our_value = layout_.compact ? master_at(i) : value_at(ours, layout_.params, i);
        const double their_value =
            layout_.compact ? static_cast<const float*>(theirs)[i] : value_at(theirs, layout_.params, i);
        m = std::max(m, std::fabs(our_value - their_value));
      }
      const std::lock_guard<std::mutex> lock(mu);
      max_diff = std::max(max_diff, m);
    });
    return max_diff;
  }

  void finish(bool all_correct) {
    const double ratio = last_.gparams / last_.torch_gparams;
    const bool mixed = layout_.grads != ElementType::kF32 || layout_.write16 || layout_.params_16bit();
    const double ratio_target = mixed ? 1.3 : 1.0;
    report_.summary("at " + std::to_string(last_.threads) + " threads",
                    "tierzero " + fixed(last_.gparams, 3) + " Gparam/s, torch fused AdamW " +
                        fixed(last_.torch_gparams, 3) + " Gparam/s, ratio " + fixed(ratio, 2) +
                        ", median per-round ratio " + fixed(last_.round_ratio, 2) +
                        " (target >= " + fixed(ratio_target, 1) +
                        (std::isfinite(ratio) ? (ratio >= ratio_target ? ": met)" : ": NOT met)") : ")"));
    const double share = last_.gbps / last_.copy_gbps;
    report_.summary("effective bandwidth", fixed(last_.gbps, 2) + " GB/s = " + fixed(100 * share, 1) +
                                               "% of STREAM copy " + fixed(last_.copy_gbps, 2) +
                                               " GB/s (target >= 85%: " + (share >= 0.85 ? "met)" : "NOT met)"));
    report_.summary("roofline", "the step's memory traffic without Adam's arithmetic runs at " +
                                    fixed(last_.roof_gbps, 2) + " GB/s; tierzero " + fixed(last_.gbps, 2) +
                                    " GB/s = " + fixed(100 * last_.gbps / last_.roof_gbps, 1) + "% of it, torch " +
                                    fixed(last_.torch_gbps, 2) + " GB/s at its " + fixed(layout_.torch_bytes(), 0) +
                                    " B/param = " + fixed(100 * last_.torch_gbps / last_.roof_gbps, 1) + "%");
    report_.end(all_correct);
    if (!flags_.json.empty()) throw_if_error(report_.write_json(flags_.json));
    if (!all_correct) throw ExitCode{3};
  }

  struct LastRow {
    int threads = 0;
    double gparams = 0, gbps = 0, torch_gparams = NAN, torch_gbps = NAN, round_ratio = NAN, copy_gbps = 0;
    double roof_gbps = 0;
  };

  const BenchAdamFlags& flags_;
  BenchReport report_;
  cpu_adam::CpuAdam shadow_adam_{{.threads = 1}};
  std::vector<float> shadow_params_, shadow_m_scales_, shadow_v_scales_;
  std::vector<uint16_t> shadow_params16_;
  std::vector<uint8_t> shadow_m_, shadow_v_;
  Layout layout_{};
  size_t n_ = 0;
  std::unique_ptr<BenchBuffers> buffers_;
  std::unique_ptr<TorchAdamPeer> peer_;
  int64_t step_number_ = 0;
  LastRow last_;
};

}  // namespace

void add_bench_adam_command(CLI::App& bench) {
  auto flags = std::make_shared<BenchAdamFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "adam", "CPU Adam/AdamW (cpu_adam/): Gparam/s and GB/s vs STREAM bandwidth and PyTorch fused AdamW");
  cmd->add_option("--params", flags->params, "Parameters per step (default 67108864 = 2^26)")
      ->check(whole_number_in(1, 100'000'000'000));
  cmd->add_option("--threads", flags->threads,
                  "Threads, the sweep's largest (default: every core this process may use)")
      ->check(whole_number_in(1, 4096));
  cmd->add_flag("--sweep,!--no-sweep", flags->sweep, "Also measure 1, 2, 4, ... threads (default on)");
  cmd->add_option("--param-dtype", flags->param_dtype,
                  "fp32 | bf16 | fp16: fp32 masters, or 16-bit params updated in place (default fp32)");
  cmd->add_option("--grad-dtype", flags->grad_dtype, "fp32 | bf16 | fp16 (default bf16)");
  cmd->add_option("--state-dtype,--moments", flags->state_dtype,
                  "fp32 | bf16 | int8: m and v (int8: 8-bit blockwise, i8 m and u8 v with an fp32 scale per 256; "
                  "default fp32)");
  cmd->add_option("--master", flags->master,
                  "fp32 | compact: fp32 master params, or the exact compact master (bf16 params + int16 residual; "
                  "default fp32)");
  cmd->add_option("--params16-dtype", flags->params16_dtype,
                  "bf16 | fp16 | none: 16-bit copy of fp32 params (default bf16; none with 16-bit params)");
  cmd->add_option("--tile-elements", flags->tile_elements, "Elements per cpu_adam task (default 16384)")
      ->check(whole_number_in(1, int64_t{1} << 30));
  cmd->add_option("--save-params", flags->save_params,
                  "After the run, write tierzero's params (raw, in --param-dtype) to this file");
  cmd->add_option("--steps", flags->steps, "Timed steps per implementation and thread count (default 10)")
      ->check(whole_number_in(1, 1'000'000));
  cmd->add_flag("--pin", flags->pin, "Pin tierzero's arena threads to cores");
  cmd->add_flag("--streaming-stores", flags->streaming_stores,
                "Non-temporal stores for tierzero's fp32 outputs (CpuAdamOptions::streaming_stores; default off)");
  cmd->add_option("--json", flags->json, "Also write the results as JSON to this file");
  cmd->callback([flags] { BenchAdam(*flags).run(); });
}

}  // namespace tierzero::tools
