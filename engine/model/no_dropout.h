// Evaluation mode for the forwards of this thread: inside a NoDropoutScope no dropout is drawn
// (LoRA's lora_dropout, the only dropout the models have), as transformers' model.eval() makes
// the forward deterministic. Training forwards run outside any scope.
#pragma once

namespace tierzero::engine {

class NoDropoutScope {
 public:
  NoDropoutScope();
  ~NoDropoutScope();
  NoDropoutScope(const NoDropoutScope&) = delete;
  NoDropoutScope& operator=(const NoDropoutScope&) = delete;

 private:
  bool previous_;
};

// False inside a NoDropoutScope on the calling thread.
bool dropout_enabled();

}  // namespace tierzero::engine
