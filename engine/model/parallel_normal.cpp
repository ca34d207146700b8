// One normal_ drawn in chunks on every core, bit for bit (internal/init_value.h).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include <algorithm>
#include <array>

#include "common/common.h"
#include "engine/model/internal/init_value.h"

namespace tierzero::engine {
namespace {

constexpr int kStateWords = 624;  // MT19937's N, M and constants, as at::mt19937 uses them
constexpr int kShift = 397;

uint32_t twist(uint32_t u, uint32_t v) {
  return (((u & 0x80000000u) | (v & 0x7fffffffu)) >> 1) ^ ((v & 1u) != 0 ? 0x9908b0dfu : 0u);
}

// at::mt19937's next_state, written with indices so the compiler vectorises it.
void next_state(std::array<uint32_t, kStateWords>& s) {
  for (int i = 0; i < kStateWords - kShift; ++i) s[i] = s[i + kShift] ^ twist(s[i], s[i + 1]);
  for (int i = kStateWords - kShift; i < kStateWords - 1; ++i)
    s[i] = s[i + kShift - kStateWords] ^ twist(s[i], s[i + 1]);
  s[kStateWords - 1] = s[kShift - 1] ^ twist(s[kStateWords - 1], s[0]);
}

// Advances `d` as `outputs` calls of at::mt19937's operator() would, handing each run of state words
// they read, untempered, to use(words, count). operator() decrements left_ and twists when it
// reaches 0, then reads state_[next_++].
template <typename Use>
void advance(at::mt19937_data_pod& d, uint64_t outputs, Use use) {
  while (outputs > 0) {
    const uint64_t before_twist = std::min<uint64_t>(outputs, static_cast<uint64_t>(d.left_ - 1));
    use(d.state_.data() + d.next_, static_cast<int64_t>(before_twist));
    d.left_ -= static_cast<int>(before_twist);
    d.next_ += static_cast<uint32_t>(before_twist);
    outputs -= before_twist;
    if (outputs == 0) break;
    next_state(d.state_);
    d.left_ = kStateWords;
    d.next_ = 1;
    --outputs;
    use(d.state_.data(), 1);
  }
}

// The engine's next `m` outputs as LibTorch's uniform_real_distribution<float>(0, 1) makes them: the
// output tempered as operator() does, its low 24 bits times 2^-24.
void fill_uniform(at::mt19937_data_pod& d, int64_t m, float* out) {
  advance(d, static_cast<uint64_t>(m), [&out](const uint32_t* words, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t y = words[i];
      y ^= y >> 11;
      y ^= (y << 7) & 0x9d2c5680u;
      y ^= (y << 15) & 0xefc60000u;
      y ^= y >> 18;
      out[i] = static_cast<float>(y & 0xffffffu) * 0x1p-24f;
    }
    out += count;
  });
}

// Whether LibTorch's normal_ on >= 16 contiguous floats runs its AVX2 normal_fill here (its AVX512
// dispatch takes the AVX2 kernel too; random_param_source_test compares the two bit for bit).
bool torch_normal_is_avx2() {
#if defined(__x86_64__)
  static const bool avx2 = [] {
    const std::string capability = at::get_cpu_capability();
    return capability == "AVX2" || capability == "AVX512";
  }();
  return avx2;
#else
  return false;
#endif
}

// Floats drawn and transformed while they stay in the L1 cache (a multiple of 16).
constexpr int64_t kTile = 2048;

// Chunk j of a tensor of `numel` elements: [j * kNormalChunk, its end), the last one to numel.
int64_t chunk_count(int64_t numel) { return std::max<int64_t>(1, numel / kNormalChunk); }
int64_t chunk_numel(int64_t numel, int64_t j) {
  return j + 1 < chunk_count(numel) ? kNormalChunk : numel - j * kNormalChunk;
}

// The fewest elements a thread's slice of a range takes: a slice starting inside a chunk first skips
// up to a chunk's outputs, about a twelfth of the time drawing as many values takes.
constexpr int64_t kMinSlice = int64_t{1} << 18;

int64_t round_down16(int64_t i) { return i / 16 * 16; }
int64_t round_up16(int64_t i) { return (i + 15) / 16 * 16; }

// normal_(0, std) on `m` floats at `out` from `engine` (m >= 16: one engine output per element, Box-Muller in blocks).
// Where LibTorch's is its AVX2 normal_fill, the same steps without its generator: the uniforms
// tempered in bulk, a tile at a time: 1.55 ns an element on one core, LibTorch's normal_ 3.5 to 5.4.
void draw_normal(const at::mt19937& engine, double std, int64_t m, float* out) {
  if (torch_normal_is_avx2()) {
    at::mt19937_data_pod d = engine.data();
    const int64_t whole = m / 16 * 16;
    for (int64_t i = 0; i < whole; i += kTile) {
      const int64_t n = std::min(kTile, whole - i);
      fill_uniform(d, n, out + i);
      box_muller_avx2(out + i, n / 16, static_cast<float>(std));
    }
    if (m % 16 != 0) {  // the remainder's uniforms, then the last 16 values drawn again
      fill_uniform(d, m % 16, out + whole);
      fill_uniform(d, 16, out + m - 16);
      box_muller_avx2(out + m - 16, 1, static_cast<float>(std));
    }
    return;
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>();
  generator.get<at::CPUGeneratorImpl>()->set_engine(engine);
  at::from_blob(out, {m}, at::kFloat).normal_(0.0, std, generator);
}

// Elements [a, b) of a chunk of `length` drawn from `start` (its engine) into `out`, as the chunk's
// whole normal_ gives them (internal/init_value.h): the 16-aligned middle in place, each ragged edge
// through a few values drawn around it. A draw may stop at a multiple of 16 no later than `exact_end`;
// past it (the last 16 values a ragged chunk redraws) it runs to the chunk's end, from no later than
// exact_end so it still takes at least 16.
void draw_in_chunk(const at::mt19937& start, int64_t length, double std, int64_t a, int64_t b, float* out) {
  const int64_t exact_end = length % 16 == 0 ? length : round_down16(length - 16);
  auto draw = [&](int64_t from, int64_t to, float* dst) {
    at::mt19937 engine = start;
    skip_draws(engine, static_cast<uint64_t>(from));
    draw_normal(engine, std, to - from, dst);
  };
  auto draw_edge = [&](int64_t x, int64_t y) {  // [x, y) of a few values through scratch
    int64_t from = round_down16(x), to = round_up16(y);
    if (to > exact_end) to = length, from = std::min(from, exact_end);
    std::array<float, 64> scratch{};
    if (to - from > static_cast<int64_t>(scratch.size()))
      throw Error(internal_error("normal edge of " + std::to_string(to - from) + " values"));
    draw(from, to, scratch.data());
    std::copy(scratch.begin() + (x - from), scratch.begin() + (y - from), out + (x - a));
  };
  const int64_t mid_begin = round_up16(a), mid_end = std::min(round_down16(b), exact_end);
  if (mid_end - mid_begin < 16) {
    draw_edge(a, b);
    return;
  }
  if (a < mid_begin) draw_edge(a, mid_begin);
  draw(mid_begin, mid_end, out + (mid_begin - a));
  if (mid_end < b) draw_edge(mid_end, b);
}

}  // namespace

uint64_t normal_draws(int64_t numel) {
  return static_cast<uint64_t>(numel) + (numel % 16 != 0 ? 16 : 0);
}

void skip_draws(at::mt19937& engine, uint64_t outputs) {
  at::mt19937_data_pod d = engine.data();
  advance(d, outputs, [](const uint32_t*, int64_t) {});
  engine.set_data(d);
}

NormalChunks normal_chunks(const at::mt19937& start, int64_t numel) {
  if (numel < 16) throw Error(internal_error("normal_chunks of " + std::to_string(numel) + " elements (< 16)"));
  NormalChunks chunks{.starts = {start}, .end = start};
  const int64_t count = chunk_count(numel);
  for (int64_t j = 1; j < count; ++j) {
    chunks.starts.push_back(chunks.starts.back());
    skip_draws(chunks.starts.back(), kNormalChunk);
  }
  chunks.end = chunks.starts.back();
  skip_draws(chunks.end, normal_draws(chunk_numel(numel, count - 1)));
  return chunks;
}

void fill_normal(const NormalChunks& chunks, double std, int64_t numel, int64_t first, std::span<float> out) {
  const auto count = static_cast<int64_t>(chunks.starts.size());
  const auto n = static_cast<int64_t>(out.size());
  if (count != chunk_count(numel) || first < 0 || first + n > numel)
    throw Error(internal_error("fill_normal: elements [" + std::to_string(first) + ", " + std::to_string(first + n) +
                               ") of " + std::to_string(numel) + " with " + std::to_string(count) + " chunk engines"));
  // One contiguous slice of the range per thread (16-aligned), each drawn chunk by chunk.
  const int64_t slices = std::clamp<int64_t>(n / kMinSlice, 1, at::get_num_threads());
  auto bound = [&](int64_t i) { return i == slices ? first + n : std::max(first, (first + n * i / slices) / 16 * 16); };
  at::parallel_for(0, slices, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t lo = bound(i), hi = bound(i + 1);
      for (int64_t j = std::min(lo / kNormalChunk, count - 1); j < count && j * kNormalChunk < hi; ++j) {
        const int64_t start = j * kNormalChunk, chunk_end = start + chunk_numel(numel, j);
        const int64_t a = std::max(lo, start), b = std::min(hi, chunk_end);
        if (a < b) draw_in_chunk(chunks.starts[static_cast<size_t>(j)], chunk_end - start, std, a - start, b - start,
                                 out.data() + (a - first));
      }
    }
  });
}

}  // namespace tierzero::engine
