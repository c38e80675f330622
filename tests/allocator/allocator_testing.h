// Helpers for the allocator suites: a caching allocator over a host segment source the
// test controls (capacity, hand-completed events), and shorthands for its statistics.
#pragma once

#include <memory>

#include "allocator/caching_allocator.h"
#include "allocator/host_segment_source.h"
#include "testing.h"

namespace kiln::testing {

inline constexpr size_t kKiB = 1024;
inline constexpr size_t kMiB = 1024 * 1024;

/// A caching allocator over host memory, with its source kept at hand.
struct TestAllocator {
  HostSegmentSource* source;
  std::unique_ptr<CachingAllocator> allocator;

  explicit TestAllocator(size_t capacity = 0, AllocatorConfig config = {}, bool manual_events = true) {
    auto src = std::make_unique<HostSegmentSource>(HostSegmentSource::Options{capacity, manual_events});
    source = src.get();
    allocator = std::make_unique<CachingAllocator>(std::move(src), config);
  }
  CachingAllocator* operator->() { return allocator.get(); }
  /// One statistic's current value for all pools / a pool.
  int64_t current(StatArray MemoryStats::*stat, StatPool pool = StatPool::All) const {
    return (allocator->stats().*stat)[pool].current;
  }
};

}  // namespace kiln::testing
