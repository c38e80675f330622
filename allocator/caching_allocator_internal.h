// The caching allocator's private data structures, shared by its source files
// (caching_allocator.cpp: the allocate/free path; caching_allocator_expandable.cpp: expandable
// segments; caching_allocator_report.cpp: statistics, snapshots, history and private pools).
// Not part of the public API.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <set>
#include <string>
#include <vector>

#include "../core/small_vector.h"
#include "caching_allocator.h"
#include "memory_report.h"

namespace kiln {

/// A block: a run of consecutive bytes inside a segment, free or handed out.
struct CachingAllocator::Block {
  uintptr_t ptr = 0;
  size_t size = 0;        // a multiple of kMinBlockSize
  size_t requested = 0;   // what the user asked for, while allocated
  StreamId stream = 0;    // the stream the segment was allocated for
  BlockPool* pool = nullptr;
  Block* prev = nullptr;  // neighbours in the same segment (address order)
  Block* next = nullptr;
  bool allocated = false;
  int event_count = 0;    // stream events still pending before reuse
  uint64_t last_used = 0;  // tick of the last free, for garbage collection
  SmallVector<StreamId, 2> stream_uses;  // streams from record_stream, while allocated
  ExpandableSegment* expandable = nullptr;  // the expandable segment it lies in, if any
  /// True when the block shares its segment with other blocks.
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

/// The free blocks of one pool, ordered for best-fit search.
struct CachingAllocator::BlockPool {
  BlockPool(CachingAllocator* owning_allocator, bool small, PrivatePool* owner_pool, std::pmr::memory_resource* memory)
      : allocator(owning_allocator), blocks(memory), is_small(small), owner(owner_pool) {}
  CachingAllocator* allocator;  // for a DataPtr's free, which only has the block
  std::pmr::set<Block*, BlockOrder> blocks;
  bool is_small;
  PrivatePool* owner;  // null for the default pools
  bool expandable = false;  // its segments are expandable (default pools with expandable segments)
};

/// A pool of its own for allocations made during a CUDA Graph capture.
struct CachingAllocator::PrivatePool {
  PrivatePool(CachingAllocator* allocator, MemPoolId pool_id, std::pmr::memory_resource* memory)
      : id(pool_id), small(allocator, true, this, memory), large(allocator, false, this, memory) {}
  MemPoolId id;
  BlockPool small;
  BlockPool large;
  size_t segments = 0;   // segments this pool holds
  bool released = false;  // release_pool() was called: segments go as they empty
};

/// The event recorded on a segment's stream by a free that left pages with no live byte: the
/// work that used those pages was queued before it, so once it has completed they may be
/// unmapped. One per such free, shared by the pages it emptied (a page that fills again or is
/// unmapped lets go of it; the last one gives the event back to the source).
struct CachingAllocator::FreeEvent {
  EventId event = 0;
  StreamId stream = 0;
  size_t pages = 0;        // pages that point at it
  bool recorded = false;   // false: freed during a capture; recorded when first asked after it
  bool completed = false;  // known to have completed (the event went back to the source then)
};

/// One page-sized slot of an expandable segment's address range.
struct CachingAllocator::ExpandablePage {
  PageHandle handle = 0;  // the physical page mapped here; 0: unmapped
  size_t live = 0;        // bytes of blocks in use (allocated, or awaiting stream events) on it
  uint64_t freed = 0;     // allocator tick at which `live` last fell to 0
  FreeEvent* free_event = nullptr;  // with no live byte: what to wait for before unmapping (null: nothing)
};

/// An address range of one (pool, stream), tiled by its blocks, with pages mapped under the
/// blocks in use and wherever cached pages have not been moved or unmapped yet.
struct CachingAllocator::ExpandableSegment {
  uintptr_t base = 0;
  size_t size = 0;  // bytes of address space
  size_t page = 0;  // bytes of a page
  BlockPool* pool = nullptr;
  StreamId stream = 0;
  uint64_t id = 0;  // creation order: a deterministic tie-break between segments
  std::vector<ExpandablePage> pages;
  size_t mapped = 0;  // pages mapped
  size_t used = 0;    // pages with live bytes
  size_t live = 0;    // bytes of blocks in use
  size_t page_of(uintptr_t address) const { return (address - base) / page; }
  uintptr_t address_of(size_t index) const { return base + index * page; }
};

/// A mapped page with no live byte: a page to move where a segment grows, or to unmap.
struct CachingAllocator::FreePage {
  uint64_t freed;  // least recently freed first
  uint64_t segment;
  size_t index;
  ExpandableSegment* seg;
  bool operator<(const FreePage& o) const {
    if (freed != o.freed) return freed < o.freed;
    if (segment != o.segment) return segment < o.segment;
    return index < o.index;
  }
};

/// Every expandable segment of an allocator.
struct CachingAllocator::Expandable {
  explicit Expandable(std::pmr::memory_resource* memory) : free_pages(memory) {}
  size_t granularity = 0;    // the source's page size
  size_t address_space = 0;  // bytes of a new segment's range (0: not decided yet)
  std::map<uint64_t, std::unique_ptr<ExpandableSegment>> segments;  // by id
  // Nodes from the allocator's free list: a page that empties and fills again on the hot
  // path (a small block freed and reallocated) touches no general-purpose heap.
  std::pmr::set<FreePage> free_pages;
  std::vector<std::unique_ptr<FreeEvent>> free_events;  // every FreeEvent record, in use or spare
  std::vector<FreeEvent*> spare_free_events;            // records to reuse
  uint64_t next_id = 1;
};

}  // namespace kiln
