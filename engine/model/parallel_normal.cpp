// One normal_ drawn in chunks on every core, bit for bit (internal/init_value.h).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>

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

// Chunk j of a tensor of `numel` elements: [j * kNormalChunk, its end), the last one to numel.
int64_t chunk_count(int64_t numel) { return std::max<int64_t>(1, numel / kNormalChunk); }
int64_t chunk_numel(int64_t numel, int64_t j) {
  return j + 1 < chunk_count(numel) ? kNormalChunk : numel - j * kNormalChunk;
}

}  // namespace

uint64_t normal_draws(int64_t numel) {
  return static_cast<uint64_t>(numel) + (numel % 16 != 0 ? 16 : 0);
}

void skip_draws(at::mt19937& engine, uint64_t outputs) {
  at::mt19937_data_pod d = engine.data();
  while (outputs > 0) {
    // operator() decrements left_ and twists when it reaches 0, then reads state_[next_++].
    const uint64_t before_twist = std::min<uint64_t>(outputs, static_cast<uint64_t>(d.left_ - 1));
    d.left_ -= static_cast<int>(before_twist);
    d.next_ += static_cast<uint32_t>(before_twist);
    outputs -= before_twist;
    if (outputs == 0) break;
    next_state(d.state_);
    d.left_ = kStateWords;
    d.next_ = 1;
    --outputs;
  }
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

void fill_normal(const NormalChunks& chunks, double std, std::span<float> out) {
  const auto numel = static_cast<int64_t>(out.size());
  const auto count = static_cast<int64_t>(chunks.starts.size());
  if (count != chunk_count(numel))
    throw Error(internal_error("fill_normal: " + std::to_string(count) + " chunk engines for " +
                               std::to_string(numel) + " elements"));
  at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>();
      generator.get<at::CPUGeneratorImpl>()->set_engine(chunks.starts[static_cast<size_t>(j)]);
      at::from_blob(out.data() + j * kNormalChunk, {chunk_numel(numel, j)}, at::kFloat).normal_(0.0, std, generator);
    }
  });
}

}  // namespace tierzero::engine
