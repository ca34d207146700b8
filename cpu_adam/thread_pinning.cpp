#include "cpu_adam/internal/thread_pinning.h"

#include <pthread.h>
#include <sched.h>

#include <utility>

namespace tierzero::cpu_adam::detail {
namespace {

// The affinity a thread had before it entered the arena.
thread_local cpu_set_t saved_affinity;
thread_local bool has_saved_affinity = false;

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

ThreadPinner::ThreadPinner(tbb::task_arena& arena, std::vector<int> cpus)
    : tbb::task_scheduler_observer(arena), cpus_(std::move(cpus)) {
  observe(true);
}

ThreadPinner::~ThreadPinner() { observe(false); }

void ThreadPinner::on_scheduler_entry(bool /*is_worker*/) {
  const int slot = tbb::this_task_arena::current_thread_index();
  if (slot < 0 || cpus_.empty()) return;
  has_saved_affinity = pthread_getaffinity_np(pthread_self(), sizeof saved_affinity, &saved_affinity) == 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus_[static_cast<size_t>(slot) % cpus_.size()], &set);
  // Best effort: a refused affinity (e.g. a cgroup without that core) leaves the thread unpinned.
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void ThreadPinner::on_scheduler_exit(bool /*is_worker*/) {
  if (!has_saved_affinity) return;
  pthread_setaffinity_np(pthread_self(), sizeof saved_affinity, &saved_affinity);
  has_saved_affinity = false;
}

}  // namespace tierzero::cpu_adam::detail
