// A fixed set of worker threads taking tasks in FIFO order. Because tasks start in the order
// they were queued, a task may block on a task queued before it without deadlock.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tierzero::offload {

class TaskQueue {
 public:
  explicit TaskQueue(unsigned threads);
  // Runs every queued task, then joins the workers.
  ~TaskQueue();
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Queues `task`; it runs on a worker.
  void push(std::function<void()> task);

 private:
  void work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tierzero::offload
