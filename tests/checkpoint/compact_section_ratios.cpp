// How well zstd shrinks each section kind of a compact checkpoint (docs/formats.md quotes the
// output; the writer's part_pays_compression follows it). Not a test: run
//   build/tests/checkpoint/compact_section_ratios [elements]
// Data like a fine-tune's: weights Gaussian with a log-normal spread of per-row scales (std 0.02
// times e^N(0, 0.5), rows of 4096) and 1 % norm weights near 1; moments from 20 AdamW steps of
// Gaussian gradients with per-row scales 1e-3 times e^N(0, 1), encoded by cpu_adam as the engine
// does. Prints, per section and zstd level 1-3, the stored / raw ratio and the single-thread
// compression rate.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <zstd.h>

#include "common/common.h"
#include "cpu_adam/adam.h"

namespace {

using namespace tierzero;

constexpr size_t kRow = 4096;

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

void report(const char* name, std::span<const std::byte> raw) {
  std::vector<char> out(ZSTD_compressBound(raw.size()));
  std::printf("%-22s %9.1f MiB", name, static_cast<double>(raw.size()) / (1 << 20));
  for (int level = 1; level <= 3; ++level) {
    const auto start = std::chrono::steady_clock::now();
    const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (ZSTD_isError(n)) throw Error(internal_error(ZSTD_getErrorName(n)));
    std::printf("   L%d %.3f @ %4.0f MB/s", level, static_cast<double>(n) / static_cast<double>(raw.size()),
                static_cast<double>(raw.size()) / seconds / 1e6);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::stoull(argv[1]) : size_t{16} << 20;
  std::mt19937_64 rng(20261205);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> master(n), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> grad_scale(n / kRow + 1);
  for (size_t row = 0; row * kRow < n; ++row) {
    const bool norm = row % 100 == 99;  // 1 % of the rows: norm weights near 1
    const float scale = 0.02f * std::exp(0.5f * normal(rng));
    for (size_t i = row * kRow; i < std::min(n, (row + 1) * kRow); ++i) {
      master[i] = norm ? 1.0f + 0.05f * normal(rng) : scale * normal(rng);
    }
    grad_scale[row] = 1e-3f * std::exp(normal(rng));
  }
  const float beta1 = 0.9f, beta2 = 0.999f;
  for (int step = 0; step < 20; ++step) {
    for (size_t i = 0; i < n; ++i) {
      const float g = grad_scale[i / kRow] * normal(rng);
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    }
  }
  std::vector<uint16_t> hi(n);
  std::vector<int16_t> residual(n);
  std::vector<int8_t> m_codes(n);
  std::vector<uint8_t> v_codes(n);
  std::vector<float> m_scales(cpu_adam::moment_block_count(n)), v_scales(m_scales.size());
  throw_if_error(cpu_adam::split_master(master, hi, residual));
  throw_if_error(cpu_adam::encode_moment_blocks(m, cpu_adam::elements(std::span(m_codes)), m_scales));
  throw_if_error(cpu_adam::encode_moment_blocks(v, cpu_adam::elements(std::span(v_codes)), v_scales));
  std::printf("%zu elements; zstd stored/raw ratio and single-thread rate per level\n", n);
  report("master hi (BF16)", bytes_of(hi));
  report("master residual (I16)", bytes_of(residual));
  report("exp_avg codes (I8)", bytes_of(m_codes));
  report("exp_avg_sq codes (U8)", bytes_of(v_codes));
  report("exp_avg scales (F32)", bytes_of(m_scales));
  report("exp_avg_sq scales (F32)", bytes_of(v_scales));
  report("fp32 master (F32)", bytes_of(master));
  return 0;
}
