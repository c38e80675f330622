// AllocatorLock (allocator/allocator_lock.h): mutual exclusion under contention, including
// holders that keep the lock long enough for waiters to go to sleep and be woken.
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "allocator/allocator_lock.h"
#include "testing.h"

using namespace kiln;

TEST_CASE("AllocatorLock: no update is lost when threads contend") {
  AllocatorLock lock;
  int64_t counter = 0;  // guarded by lock; a data race would lose increments
  constexpr int kThreads = 4, kIncrements = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        std::lock_guard<AllocatorLock> guard(lock);
        ++counter;
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(counter == int64_t{kThreads} * kIncrements);
}

TEST_CASE("AllocatorLock: waiters sleep through a long hold and all get the lock after it") {
  AllocatorLock lock;
  std::vector<int> order;  // guarded by lock
  lock.lock();
  std::vector<std::thread> waiters;
  for (int t = 0; t < 3; ++t)
    waiters.emplace_back([&, t] {
      std::lock_guard<AllocatorLock> guard(lock);
      order.push_back(t);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // long past the spin phase
  CHECK_FALSE(lock.try_lock());
  order.push_back(-1);
  lock.unlock();
  for (std::thread& t : waiters) t.join();
  REQUIRE(order.size() == 4);
  CHECK(order[0] == -1);  // nobody entered while the lock was held
  CHECK(lock.try_lock());
  lock.unlock();
}
