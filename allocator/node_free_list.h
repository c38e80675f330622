// NodeFreeList: a memory resource for the allocator's containers that keeps freed nodes on
// per-size free lists and hands them out again. A cached allocate/free pair inserts and
// erases a few tree and hash nodes; with this resource that is a pointer push and pop,
// where the general-purpose heap (or libstdc++'s pool resource, which profiles at ~40% of
// the pair) costs far more. Not thread-safe: the allocator calls it under its mutex.
#pragma once

#include <array>
#include <cstddef>
#include <memory_resource>

namespace kiln {

/// Free lists for small nodes (up to kMaxNode bytes, 16-byte granules); larger requests
/// (hash bucket arrays) go to the default resource.
class NodeFreeList : public std::pmr::memory_resource {
 public:
  static constexpr size_t kGranule = 16;
  static constexpr size_t kMaxNode = 256;

  NodeFreeList() = default;
  NodeFreeList(const NodeFreeList&) = delete;
  NodeFreeList& operator=(const NodeFreeList&) = delete;
  ~NodeFreeList() override {
    for (size_t c = 0; c < heads_.size(); ++c) {
      while (FreeNode* n = heads_[c]) {
        heads_[c] = n->next;
        ::operator delete(n, (c + 1) * kGranule, std::align_val_t(kGranule));
      }
    }
  }

 private:
  struct FreeNode {
    FreeNode* next;
  };
  static size_t size_class(size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }

  void* do_allocate(size_t bytes, size_t alignment) override {
    if (bytes > kMaxNode || alignment > kGranule) return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    const size_t c = size_class(bytes);
    if (FreeNode* n = heads_[c]) {
      heads_[c] = n->next;
      return n;
    }
    return ::operator new((c + 1) * kGranule, std::align_val_t(kGranule));
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    if (bytes > kMaxNode || alignment > kGranule) return std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    const size_t c = size_class(bytes);
    heads_[c] = new (p) FreeNode{heads_[c]};
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::array<FreeNode*, kMaxNode / kGranule> heads_{};
};

}  // namespace kiln
