// The caching allocator's private data structures, shared by its two source files
// (caching_allocator.cpp: the allocate/free path; caching_allocator_report.cpp: statistics,
// snapshots, history and private pools). Not part of the public API.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <set>
#include <string>

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

}  // namespace kiln
