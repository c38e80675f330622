// Per-thread free lists for the small objects every new tensor needs: its TensorImpl and
// its StorageImpl, each created with std::allocate_shared(PoolAllocator<T>(), ...). An eager
// op on a small tensor spends more time creating and destroying these than computing, and
// reusing the previous tensor's memory is a pointer pop and push where the general heap
// costs ~100 instructions per pair (bench/cuda_overhead).
//
// Memory freed on another thread joins that thread's lists; each list keeps at most
// kMaxCached objects and the rest goes back to the heap, as does everything when a thread
// exits. After its thread's lists are gone (objects destroyed during thread or program
// exit), allocation and free fall through to the heap.
#pragma once

#include <cstddef>
#include <new>

namespace kiln {

namespace detail {
/// Size classes of 16 bytes up to 256 bytes; larger requests use the heap directly.
inline constexpr size_t kPoolGranule = 16;
inline constexpr size_t kPoolMaxBytes = 256;
inline constexpr size_t kPoolMaxCached = 256;
inline constexpr size_t kPoolClasses = kPoolMaxBytes / kPoolGranule;

struct PoolNode {
  PoolNode* next;
};
enum class PoolState : unsigned char { Unused, Live, Gone };
/// One thread's lists. Trivially destructible (so it stays readable, and is found Gone, in
/// frees that run after the thread's exit handlers, e.g. of tensors in static objects) and
/// constant-initialised (so reaching it is one thread-pointer-relative address).
struct PoolLists {
  PoolNode* heads[kPoolClasses];
  unsigned short counts[kPoolClasses];
  PoolState state;
};
inline thread_local PoolLists t_pool_lists{};

/// The slow paths: first use on a thread, an empty list, a full list, a large request.
void* pool_allocate_slow(size_t bytes);
void pool_deallocate_slow(void* p, size_t bytes) noexcept;

/// Memory of at least `bytes`, 16-byte aligned, from this thread's free list for its size.
inline void* pool_allocate(size_t bytes) {
  if (bytes - 1 < kPoolMaxBytes) [[likely]] {  // 1..256 (an empty list on an unused or finished thread falls through)
    PoolLists& lists = t_pool_lists;
    const size_t c = (bytes - 1) / kPoolGranule;
    if (PoolNode* n = lists.heads[c]) [[likely]] {
      lists.heads[c] = n->next;
      --lists.counts[c];
      return n;
    }
  }
  return pool_allocate_slow(bytes);
}

/// Returns memory from pool_allocate(bytes) (allocated on any thread).
inline void pool_deallocate(void* p, size_t bytes) noexcept {
  PoolLists& lists = t_pool_lists;
  if (bytes - 1 < kPoolMaxBytes && lists.state == PoolState::Live && p != nullptr) [[likely]] {
    const size_t c = (bytes - 1) / kPoolGranule;
    if (lists.counts[c] < kPoolMaxCached) [[likely]] {
      lists.heads[c] = new (p) PoolNode{lists.heads[c]};
      ++lists.counts[c];
      return;
    }
  }
  pool_deallocate_slow(p, bytes);
}
}  // namespace detail

/// A std::allocator replacement backed by the per-thread free lists (stateless).
template <typename T>
struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= detail::kPoolGranule, "PoolAllocator: over-aligned type");

  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  /// Memory for `n` objects of T.
  T* allocate(size_t n) { return static_cast<T*>(detail::pool_allocate(n * sizeof(T))); }
  /// Gives back memory from allocate(n).
  void deallocate(T* p, size_t n) noexcept { detail::pool_deallocate(p, n * sizeof(T)); }

  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace kiln
