// The staging slots (offload/offload.h) against a reference model, a LIFO stack of free slot indices:
// slots are lent in its order, take() blocks while every slot is lent and returns the slot given
// back; across threads no slot is ever lent twice at once and each piece written into a slot is
// what the consumer reads. The record slots over them: a record holds one slot at most, hold()
// blocks while every slot is held until one is freed, a freed or abandoned slot comes back zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
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

// `count` zeroed slots of `bytes` lent to `records` records.
struct RecordFixture {
  RecordFixture(int count, int64_t records, uint64_t bytes = 64) : memory(static_cast<size_t>(count) * bytes) {
    std::vector<std::span<std::byte>> spans;
    for (int s = 0; s < count; ++s) spans.emplace_back(memory.data() + static_cast<size_t>(s) * bytes, bytes);
    slots = std::make_unique<RecordSlots>(std::move(spans), records);
  }
  // Whether every byte of `slot` is zero.
  static bool zero(std::span<const std::byte> slot) {
    return std::all_of(slot.begin(), slot.end(), [](std::byte b) { return b == std::byte{0}; });
  }
  std::vector<std::byte> memory;
  std::unique_ptr<RecordSlots> slots;
};

TEST(RecordSlots, ARecordHoldsOneSlotAtMost) {
  RecordFixture f(3, 5);
  EXPECT_TRUE(f.slots->slot_of(3).empty());
  EXPECT_TRUE(f.slots->held().empty());
  const std::span<std::byte> three = f.slots->hold(3);
  ASSERT_EQ(three.size(), 64u);
  EXPECT_EQ(f.slots->hold(3).data(), three.data()) << "a record holding a slot was lent another";
  EXPECT_EQ(f.slots->slot_of(3).data(), three.data());
  const std::span<std::byte> one = f.slots->hold(1);
  EXPECT_NE(one.data(), three.data());
  EXPECT_TRUE(f.slots->slot_of(0).empty());
  const std::vector<std::pair<int64_t, std::span<std::byte>>> held = f.slots->held();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].first, 1);
  EXPECT_EQ(held[0].second.data(), one.data());
  EXPECT_EQ(held[1].first, 3);
  EXPECT_EQ(held[1].second.data(), three.data());
  // Released, the record holds none, and the slot is not lent again until freed.
  const std::optional<size_t> released = f.slots->release(3);
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(f.memory.data() + *released * 64, three.data());
  EXPECT_TRUE(f.slots->slot_of(3).empty());
  EXPECT_FALSE(f.slots->release(3).has_value()) << "released a slot twice";
  const std::span<std::byte> four = f.slots->hold(4);  // the third slot: the released one is still lent
  EXPECT_NE(four.data(), three.data());
  EXPECT_NE(four.data(), one.data());
  ASSERT_EQ(f.slots->held().size(), 2u);
  EXPECT_EQ(f.slots->held()[1].first, 4);
  // Every slot is lent now: a record holding one is given it again without waiting for another.
  std::future<std::span<std::byte>> again = std::async(std::launch::async, [&] { return f.slots->hold(4); });
  const bool waited = again.wait_for(std::chrono::seconds(5)) != std::future_status::ready;
  f.slots->free(*released);  // wakes a hold() that waits
  EXPECT_FALSE(waited) << "a record holding a slot waited for another";
  EXPECT_EQ(again.get().data(), four.data());
}

TEST(RecordSlots, HoldBlocksWhileEverySlotIsHeldUntilOneIsFreed) {
  RecordFixture f(2, 4);
  const std::span<std::byte> first = f.slots->hold(0);
  (void)f.slots->hold(1);
  std::memset(first.data(), 0x5a, first.size());
  std::future<std::span<std::byte>> third = std::async(std::launch::async, [&] { return f.slots->hold(2); });
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "lent a third slot of two";
  const std::optional<size_t> released = f.slots->release(0);
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "a released slot was lent before it was freed";
  EXPECT_FALSE(RecordFixture::zero(first)) << "release() zeroed the slot: the caller still reads it";
  f.slots->free(*released);
  ASSERT_EQ(third.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const std::span<std::byte> got = third.get();
  EXPECT_EQ(got.data(), first.data());
  EXPECT_TRUE(RecordFixture::zero(got)) << "a freed slot was lent again with its old bytes";
  EXPECT_EQ(f.slots->slot_of(2).data(), first.data());
}

TEST(RecordSlots, AbandonZeroesAndFreesEveryHeldSlot) {
  RecordFixture f(3, 6);
  for (const int64_t record : {5, 2, 0}) {
    const std::span<std::byte> slot = f.slots->hold(record);
    std::memset(slot.data(), static_cast<int>(record) + 1, slot.size());
  }
  // A hold() blocked on the full ring wakes when abandon() frees the slots.
  std::future<std::span<std::byte>> waiting = std::async(std::launch::async, [&] { return f.slots->hold(1); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  f.slots->abandon();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  (void)waiting.get();
  for (const int64_t record : {0, 2, 5}) EXPECT_TRUE(f.slots->slot_of(record).empty()) << "record " << record;
  ASSERT_EQ(f.slots->held().size(), 1u);
  EXPECT_EQ(f.slots->held()[0].first, 1);
  EXPECT_TRUE(RecordFixture::zero(f.memory)) << "abandon() left bytes in a slot";
  // Every slot is free again but the one record 1 holds: two more records are lent one without waiting.
  std::future<void> two_more = std::async(std::launch::async, [&] {
    (void)f.slots->hold(3);
    (void)f.slots->hold(4);
  });
  ASSERT_EQ(two_more.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "abandon() freed no slot";
  EXPECT_EQ(f.slots->held().size(), 3u);
}

// One thread lends records in turn and fills each record's slot with its number; another reads every
// held record's slot, releases it and frees it, as the gradient ring's backward and optimizer do. No
// slot is held by two records at once, each slot is zero when lent, and every record reads its own.
TEST(RecordSlots, AcrossThreadsEachRecordReadsItsOwnSlot) {
  constexpr int kRecords = 2000;
  RecordFixture f(3, kRecords, sizeof(int));
  std::atomic<int> wrong = 0;
  std::atomic<int> filled = 0;  // records filled so far
  std::thread reader([&] {
    for (int record = 0; record < kRecords; ++record) {
      while (filled.load() <= record) std::this_thread::yield();
      const std::span<std::byte> slot = f.slots->slot_of(record);
      int got = -1;
      if (slot.empty()) {
        ++wrong;
      } else {
        std::memcpy(&got, slot.data(), sizeof(int));
      }
      if (got != record + 1) ++wrong;
      const std::optional<size_t> released = f.slots->release(record);
      if (!released.has_value()) {
        ++wrong;
        continue;
      }
      f.slots->free(*released);
    }
  });
  for (int record = 0; record < kRecords; ++record) {
    const std::span<std::byte> slot = f.slots->hold(record);
    if (!RecordFixture::zero(slot)) ++wrong;
    for (const auto& [other, bytes] : f.slots->held())
      if (other != record && bytes.data() == slot.data()) ++wrong;  // lent while still held
    const int value = record + 1;
    std::memcpy(slot.data(), &value, sizeof(int));
    filled.store(record + 1);
  }
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(f.slots->held().empty());
}

}  // namespace
}  // namespace tierzero::offload
