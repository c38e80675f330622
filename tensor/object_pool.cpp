// The slow paths of the per-thread free lists behind PoolAllocator (see object_pool.h).
#include "object_pool.h"

namespace kiln::detail {

namespace {

// Gives the cached memory back when the thread exits; registered on the first allocation.
struct ListsReleaser {
  ~ListsReleaser() {
    PoolLists& lists = t_pool_lists;
    lists.state = PoolState::Gone;
    for (size_t c = 0; c < kPoolClasses; ++c) {
      while (PoolNode* n = lists.heads[c]) {
        lists.heads[c] = n->next;
        ::operator delete(n);
      }
      lists.counts[c] = 0;
    }
  }
};
thread_local ListsReleaser t_releaser;

}  // namespace

void* pool_allocate_slow(size_t bytes) {
  if (bytes == 0 || bytes > kPoolMaxBytes) return ::operator new(bytes);
  PoolLists& lists = t_pool_lists;
  if (lists.state == PoolState::Unused) {
    static_cast<void>(&t_releaser);  // constructs it, so its destructor runs at thread exit
    lists.state = PoolState::Live;
  }
  // The class's list is empty (or the thread's lists are gone): fresh memory of the full
  // class size, so it can join any list of that class later.
  return ::operator new(((bytes - 1) / kPoolGranule + 1) * kPoolGranule);
}

void pool_deallocate_slow(void* p, size_t /*bytes*/) noexcept { ::operator delete(p); }

}  // namespace kiln::detail
