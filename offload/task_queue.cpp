#include "offload/internal/task_queue.h"

namespace tierzero::offload {

TaskQueue::TaskQueue(unsigned threads) {
  for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

TaskQueue::~TaskQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void TaskQueue::push(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void TaskQueue::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace tierzero::offload
