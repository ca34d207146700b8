// The staging slots (offload/offload.h) against a reference model, a LIFO stack of free slot indices:
// slots are lent in its order, take() blocks while every slot is lent and returns the slot given
// back; across threads no slot is ever lent twice at once and each piece written into a slot is
// what the consumer reads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "offload/offload.h"

namespace tierzero::offload {
namespace {

struct Fixture {
  explicit Fixture(int count, uint64_t bytes = 64) : memory(static_cast<size_t>(count) * bytes) {
    std::vector<std::span<std::byte>> spans;
    for (int s = 0; s < count; ++s) spans.emplace_back(memory.data() + static_cast<size_t>(s) * bytes, bytes);
    slots = std::make_unique<StagingSlots>(std::move(spans));
  }
  std::vector<std::byte> memory;
  std::unique_ptr<StagingSlots> slots;
};

TEST(StagingSlots, LendsTheSlotGivenBackLastFirst) {
  Fixture f(3);
  EXPECT_EQ(f.slots->slot_bytes(), 64u);
  std::vector<size_t> free = {2, 1, 0};  // the reference: the back is lent next
  std::vector<size_t> lent;
  for (int op : {1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0}) {  // 1: take, 0: give the oldest lent back
    if (op == 1) {
      const size_t slot = f.slots->take();
      ASSERT_EQ(slot, free.back());
      free.pop_back();
      lent.push_back(slot);
      EXPECT_EQ(f.slots->bytes(slot).data(), f.memory.data() + slot * 64);
    } else {
      ASSERT_FALSE(lent.empty()) << "the sequence gives back a slot it did not take";
      f.slots->give(lent.front());
      free.push_back(lent.front());
      lent.erase(lent.begin());
    }
  }
}

TEST(StagingSlots, TakeBlocksWhileEverySlotIsLent) {
  Fixture f(2);
  const size_t first = f.slots->take();
  (void)f.slots->take();
  std::future<size_t> third = std::async(std::launch::async, [&] { return f.slots->take(); });
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "lent a third slot of two";
  f.slots->give(first);
  ASSERT_EQ(third.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(third.get(), first);
}

// A producer fills each slot it takes with its piece number; a consumer thread checks the piece and
// gives the slot back. No slot is lent twice at once, and every piece arrives intact, in order.
TEST(StagingSlots, AcrossThreadsASlotIsLentToOneHolderAtATime) {
  constexpr int kPieces = 2000;
  Fixture f(3, sizeof(int));
  std::vector<std::atomic<bool>> held(3);
  std::mutex mutex;
  std::condition_variable queued;
  std::deque<size_t> queue;  // slots handed to the consumer, in order
  std::atomic<int> wrong = 0;
  std::thread consumer([&] {
    for (int piece = 0; piece < kPieces; ++piece) {
      size_t slot = 0;
      {
        std::unique_lock lock(mutex);
        queued.wait(lock, [&] { return !queue.empty(); });
        slot = queue.front();
        queue.pop_front();
      }
      int got = -1;
      std::memcpy(&got, f.slots->bytes(slot).data(), sizeof(int));
      if (got != piece) ++wrong;
      held[slot] = false;
      f.slots->give(slot);
    }
  });
  for (int piece = 0; piece < kPieces; ++piece) {
    const size_t slot = f.slots->take();
    if (held[slot].exchange(true)) ++wrong;  // lent while still held
    std::memcpy(f.slots->bytes(slot).data(), &piece, sizeof(int));
    {
      std::lock_guard lock(mutex);
      queue.push_back(slot);
    }
    queued.notify_one();
  }
  consumer.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace tierzero::offload
