#include "engine/zero/internal/rng_replay.h"

#include <ATen/Context.h>

#include <mutex>

namespace tierzero::engine {
namespace {

at::Generator default_generator(c10::Device device) { return at::globalContext().defaultGenerator(device); }

at::Tensor state_of(at::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_state(at::Generator& generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

RngSnapshot RngSnapshot::capture_if(bool random, c10::Device device) {
  if (!random) return RngSnapshot();
  at::Generator generator = default_generator(device);
  return RngSnapshot(device, state_of(generator));
}

RngReplay::RngReplay(const RngSnapshot& snapshot) {
  if (snapshot.empty()) return;
  generator_ = default_generator(snapshot.device());
  saved_ = state_of(generator_);
  set_state(generator_, snapshot.state());
}

RngReplay::~RngReplay() {
  if (saved_.defined()) set_state(generator_, saved_);
}

}  // namespace tierzero::engine
