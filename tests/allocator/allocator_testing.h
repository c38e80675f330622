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

  explicit TestAllocator(size_t capacity = 0, AllocatorConfig config = {}, bool manual_events = true,
                         size_t vmm_granularity = 2 * kMiB) {
    auto src =
        std::make_unique<HostSegmentSource>(HostSegmentSource::Options{capacity, manual_events, vmm_granularity});
    source = src.get();
    allocator = std::make_unique<CachingAllocator>(std::move(src), config);
  }
  CachingAllocator* operator->() { return allocator.get(); }
  /// One statistic's current value for all pools / a pool.
  int64_t current(StatArray MemoryStats::*stat, StatPool pool = StatPool::All) const {
    return (allocator->stats().*stat)[pool].current;
  }
};

/// A byte count as a statistic's type.
inline int64_t i64(size_t v) { return static_cast<int64_t>(v); }

/// The snapshot segment holding `p` (fails the test when none does).
inline SegmentInfo segment_of(CachingAllocator& a, const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (const SegmentInfo& seg : a.snapshot().segments)
    if (at >= seg.address && at < seg.address + seg.total_size) return seg;
  FAIL("no segment holds " << p);
  return {};
}

/// The snapshot block that starts at `p` (fails the test when none does).
inline BlockInfo block_at(CachingAllocator& a, const void* p) {
  for (const BlockInfo& b : segment_of(a, p).blocks)
    if (b.address == reinterpret_cast<uintptr_t>(p)) return b;
  FAIL("no block starts at " << p);
  return {};
}

}  // namespace kiln::testing
