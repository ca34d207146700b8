// Pins the threads of a oneTBB arena to cores while they work in it. Private to cpu_adam/.
#pragma once

#include <vector>

#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

namespace tierzero::cpu_adam::detail {

// Returns the cores this process may run on (sched_getaffinity), in increasing order.
std::vector<int> allowed_cpus();

// While observing, the thread in arena slot i runs only on cpus[i % cpus.size()]; a thread that
// leaves the arena gets its previous affinity back (the caller's thread joins the arena too).
class ThreadPinner : public tbb::task_scheduler_observer {
 public:
  ThreadPinner(tbb::task_arena& arena, std::vector<int> cpus);
  ~ThreadPinner() override;

  void on_scheduler_entry(bool is_worker) override;
  void on_scheduler_exit(bool is_worker) override;

 private:
  std::vector<int> cpus_;
};

}  // namespace tierzero::cpu_adam::detail
