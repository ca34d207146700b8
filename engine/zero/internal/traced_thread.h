// What `train --profile` sees of the engine's own threads (engine/train/internal/step_trace.h).
// LibTorch's profiler records only the threads it follows: the one that started it and the autograd
// threads. The offloaded optimizer, the step inside the backward and the gradient pipeline run on
// threads of the engine's own; each piece of work they take from the training thread carries that
// thread's profiler state (TracedFrom), so a trace holds their ATen ops and the engine's named spans
// (RECORD_USER_SCOPE "tierzero::...", user annotations in the Chrome trace) beside the training
// thread's, on the same clock. Without a profiler running the state is empty and nothing is recorded.
#pragma once

#include <ATen/record_function.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <pthread.h>

#include <memory>

namespace tierzero::engine {

// Names the calling thread `name` (at most 15 characters): what a trace, top -H and gdb call it.
inline void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

// The profiler's thread-local state (LibTorch's RecordFunction callbacks and the profiler's debug
// info) of the thread that made it.
class TracedFrom {
 public:
  // Captures the calling thread's state.
  TracedFrom() : callbacks_(at::get_record_function_tls_()), debug_info_(c10::ThreadLocalDebugInfo::current()) {}

  // Applies a TracedFrom's state to the calling thread for its lifetime, then restores the thread's own.
  class Scope {
   public:
    explicit Scope(const TracedFrom& from)
        : saved_callbacks_(at::get_record_function_tls_()), saved_debug_info_(c10::ThreadLocalDebugInfo::current()) {
      at::set_record_function_tls_(from.callbacks_);
      c10::ThreadLocalDebugInfo::_forceCurrentDebugInfo(from.debug_info_);
    }
    ~Scope() {
      at::set_record_function_tls_(saved_callbacks_);
      c10::ThreadLocalDebugInfo::_forceCurrentDebugInfo(saved_debug_info_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const at::RecordFunctionTLS saved_callbacks_;
    const std::shared_ptr<c10::ThreadLocalDebugInfo> saved_debug_info_;
  };

 private:
  at::RecordFunctionTLS callbacks_;
  std::shared_ptr<c10::ThreadLocalDebugInfo> debug_info_;
};

}  // namespace tierzero::engine
