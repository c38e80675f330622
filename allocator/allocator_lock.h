// AllocatorLock: the caching allocator's mutex. Every tensor's allocation and free takes it
// once, so its uncontended path matters: one atomic compare-exchange to lock and one
// exchange to unlock, inline (std::mutex goes through two glibc calls, ~100 instructions
// and ~5 cache lines per allocate/free pair). A contended waiter spins briefly, then sleeps
// on the futex behind std::atomic::wait until the holder's unlock wakes it, so a thread
// held up by a slow cudaMalloc under the lock costs the others no CPU.
//
// The three-state protocol is the classic futex mutex (Drepper, "Futexes Are Tricky",
// mutex 2): 0 free, 1 held, 2 held and someone may be asleep.
#pragma once

#include <atomic>

namespace kiln {

/// A small mutex for the caching allocator; satisfies Lockable (use with std::lock_guard).
class AllocatorLock {
 public:
  AllocatorLock() = default;
  AllocatorLock(const AllocatorLock&) = delete;
  AllocatorLock& operator=(const AllocatorLock&) = delete;

  /// Blocks until this thread holds the lock.
  void lock() {
    int expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) [[unlikely]]
      lock_contended();
  }
  /// Takes the lock if it is free; never blocks.
  bool try_lock() {
    int expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire);
  }
  /// Releases the lock, waking one sleeper if there may be any.
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]]
      state_.notify_one();
  }

 private:
  void lock_contended() {
    for (int spin = 0; spin < 100; ++spin) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (state_.load(std::memory_order_relaxed) == 0 && try_lock()) return;
    }
    // Mark the lock as wanted (2) and sleep while it stays held; the holder's unlock sees
    // the 2 and wakes one sleeper, which marks it wanted again in case others still sleep.
    while (state_.exchange(2, std::memory_order_acquire) != 0) state_.wait(2, std::memory_order_relaxed);
  }

  std::atomic<int> state_{0};
};

}  // namespace kiln
