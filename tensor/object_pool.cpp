// The per-thread free lists behind PoolAllocator (see object_pool.h).
#include "object_pool.h"

namespace kiln::detail {

namespace {

constexpr size_t kClasses = kPoolMaxBytes / kPoolGranule;

struct FreeNode {
  FreeNode* next;
};

enum class ListState : unsigned char { Unused, Live, Gone };

// Trivially destructible, so it can still be read (and found Gone) by frees that run after
// this thread's exit handlers, e.g. of tensors held in static objects.
struct ThreadLists {
  FreeNode* heads[kClasses];
  unsigned short counts[kClasses];
  ListState state;
};
thread_local ThreadLists t_lists{};

// Gives the cached memory back when the thread exits; registered on the first allocation.
struct ListsReleaser {
  ~ListsReleaser() {
    ThreadLists& lists = t_lists;
    lists.state = ListState::Gone;
    for (size_t c = 0; c < kClasses; ++c) {
      while (FreeNode* n = lists.heads[c]) {
        lists.heads[c] = n->next;
        ::operator delete(n);
      }
      lists.counts[c] = 0;
    }
  }
};
thread_local ListsReleaser t_releaser;

size_t size_class(size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kPoolGranule; }

}  // namespace

void* pool_allocate(size_t bytes) {
  if (bytes > kPoolMaxBytes) return ::operator new(bytes);
  const size_t c = size_class(bytes);
  ThreadLists& lists = t_lists;
  if (lists.state == ListState::Live) [[likely]] {
    if (FreeNode* n = lists.heads[c]) {
      lists.heads[c] = n->next;
      --lists.counts[c];
      return n;
    }
  } else if (lists.state == ListState::Unused) {
    static_cast<void>(&t_releaser);  // constructs it, so its destructor runs at thread exit
    lists.state = ListState::Live;
  }
  return ::operator new((c + 1) * kPoolGranule);
}

void pool_deallocate(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes <= kPoolMaxBytes) {
    const size_t c = size_class(bytes);
    ThreadLists& lists = t_lists;
    if (lists.state == ListState::Live && lists.counts[c] < kPoolMaxCached) [[likely]] {
      lists.heads[c] = new (p) FreeNode{lists.heads[c]};
      ++lists.counts[c];
      return;
    }
  }
  ::operator delete(p);
}

}  // namespace kiln::detail
