// The caching allocator's rules, step by step on host memory: rounding, pool choice, best
// fit, splitting and merging, with the exact statistics (PyTorch's definitions) after each.
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("requests round up to 512 bytes and small ones share a 2 MiB segment") {
  TestAllocator a;
  void* p = a->allocate(1);
  void* q = a->allocate(513);
  REQUIRE(p != nullptr);
  REQUIRE(q != nullptr);
  const MemoryStats s = a->stats();
  CHECK(s.allocation[StatPool::Small].current == 2);
  CHECK(s.allocated_bytes[StatPool::Small].current == 512 + 1024);
  CHECK(s.requested_bytes[StatPool::Small].current == 1 + 513);
  CHECK(s.segment[StatPool::Small].current == 1);
  CHECK(s.reserved_bytes[StatPool::Small].current == 2 * kMiB);
  CHECK(s.segment[StatPool::Large].current == 0);
  // Consecutive blocks of the one segment: q starts where p's rounded block ends.
  CHECK(static_cast<char*>(q) - static_cast<char*>(p) == 512);
  // The rest of the segment is one free piece of a split segment: inactive split.
  CHECK(s.inactive_split[StatPool::Small].current == 1);
  CHECK(s.inactive_split_bytes[StatPool::Small].current == static_cast<int64_t>(2 * kMiB - 1536));
  a->free(p);
  a->free(q);
  CHECK(a.current(&MemoryStats::allocation) == 0);
  CHECK(a.current(&MemoryStats::inactive_split) == 0);  // merged back into one whole segment
  CHECK(a.current(&MemoryStats::reserved_bytes) == static_cast<int64_t>(2 * kMiB));
  CHECK(a->allocate(0) == nullptr);
}

TEST_CASE("pool boundaries: 1 MiB is small, above is large; segment sizes 2, 20 and rounded-to-2 MiB") {
  TestAllocator a;
  void* small = a->allocate(1 * kMiB);
  CHECK(a.current(&MemoryStats::reserved_bytes, StatPool::Small) == static_cast<int64_t>(2 * kMiB));
  void* mid = a->allocate(1 * kMiB + 1);
  CHECK(a.current(&MemoryStats::reserved_bytes, StatPool::Large) == static_cast<int64_t>(20 * kMiB));
  // 10 MiB + 1 still fits the free rest of that 20 MiB segment: best fit takes it there.
  void* fits = a->allocate(10 * kMiB + 1);
  CHECK(a.current(&MemoryStats::segment, StatPool::Large) == 1);
  // 21 MiB + 1 fits no cached block: a segment of its own, rounded up to 2 MiB (22 MiB).
  void* big = a->allocate(21 * kMiB + 1);
  CHECK(a.current(&MemoryStats::reserved_bytes, StatPool::Large) == static_cast<int64_t>(20 * kMiB + 22 * kMiB));
  CHECK(a.current(&MemoryStats::segment, StatPool::Large) == 2);
  a->free(fits);
  a->free(small);
  a->free(mid);
  a->free(big);
}

TEST_CASE("best fit: the smallest free block that fits, lowest address on ties") {
  TestAllocator a;
  // Carve a 2 MiB small segment into blocks, then free some to leave holes of 1, 3 and 2 KiB.
  void* b0 = a->allocate(1 * kKiB);
  void* sep1 = a->allocate(512);
  void* b1 = a->allocate(3 * kKiB);
  void* sep2 = a->allocate(512);
  void* b2 = a->allocate(2 * kKiB);
  void* sep3 = a->allocate(512);
  a->free(b0);
  a->free(b1);
  a->free(b2);
  // 2 KiB fits the 3 KiB and 2 KiB holes and the large tail: best fit is the 2 KiB hole.
  CHECK(a->allocate(2 * kKiB) == b2);
  // 1 KiB fits exactly the first hole.
  CHECK(a->allocate(1 * kKiB) == b0);
  // 1.5 KiB: the only hole left below the tail is 3 KiB; it is split.
  void* c = a->allocate(1536);
  CHECK(c == b1);
  CHECK(a->allocate(1536) == static_cast<char*>(b1) + 1536);  // the rest of that hole
  for (void* p : {sep1, sep2, sep3}) a->free(p);
}

TEST_CASE("large pool splits only when more than 1 MiB would remain") {
  TestAllocator a;
  void* p = a->allocate(19 * kMiB);  // 20 MiB segment, 1 MiB remains: not split
  CHECK(a.current(&MemoryStats::inactive_split, StatPool::Large) == 0);
  CHECK(a.current(&MemoryStats::allocated_bytes, StatPool::Large) == static_cast<int64_t>(20 * kMiB));
  a->free(p);
  void* q = a->allocate(18 * kMiB);  // 2 MiB remain: split
  CHECK(a.current(&MemoryStats::allocated_bytes, StatPool::Large) == static_cast<int64_t>(18 * kMiB));
  CHECK(a.current(&MemoryStats::inactive_split, StatPool::Large) == 1);
  CHECK(a.current(&MemoryStats::inactive_split_bytes, StatPool::Large) == static_cast<int64_t>(2 * kMiB));
  CHECK(a.current(&MemoryStats::segment, StatPool::Large) == 1);  // reused the cached segment
  a->free(q);
}

TEST_CASE("freeing merges with free neighbours in any order, with exact inactive-split counts") {
  TestAllocator a;
  void* x = a->allocate(4 * kKiB);
  void* y = a->allocate(4 * kKiB);
  void* z = a->allocate(4 * kKiB);
  // Segment: [x][y][z][tail free]. Free the middle first: two free pieces (y and tail).
  a->free(y);
  CHECK(a.current(&MemoryStats::inactive_split) == 2);
  CHECK(a.current(&MemoryStats::inactive_split_bytes) == static_cast<int64_t>(2 * kMiB - 12 * kKiB + 4 * kKiB));
  a->free(z);  // z merges with y and the tail: one free piece after x
  CHECK(a.current(&MemoryStats::inactive_split) == 1);
  CHECK(a.current(&MemoryStats::inactive_split_bytes) == static_cast<int64_t>(2 * kMiB - 4 * kKiB));
  a->free(x);  // whole segment again: not split, so not counted
  CHECK(a.current(&MemoryStats::inactive_split) == 0);
  CHECK(a.current(&MemoryStats::inactive_split_bytes) == 0);
  const MemorySnapshot snap = a->snapshot();
  REQUIRE(snap.segments.size() == 1);
  REQUIRE(snap.segments[0].blocks.size() == 1);
  CHECK(snap.segments[0].blocks[0].size == 2 * kMiB);
  CHECK(snap.segments[0].blocks[0].state == BlockState::Inactive);
}

TEST_CASE("peaks, totals and their resets") {
  TestAllocator a;
  void* p = a->allocate(3 * kMiB);
  void* q = a->allocate(2 * kMiB);
  a->free(p);
  MemoryStats s = a->stats();
  CHECK(s.allocated_bytes[StatPool::All].current == static_cast<int64_t>(2 * kMiB));
  CHECK(s.allocated_bytes[StatPool::All].peak == static_cast<int64_t>(5 * kMiB));
  CHECK(s.allocated_bytes[StatPool::All].allocated == static_cast<int64_t>(5 * kMiB));
  CHECK(s.allocated_bytes[StatPool::All].freed == static_cast<int64_t>(3 * kMiB));
  CHECK(s.allocation[StatPool::All].allocated == 2);
  CHECK(s.allocation[StatPool::All].freed == 1);
  CHECK(s.num_device_alloc == 1);
  a->reset_peak_stats();
  CHECK(a->stats().allocated_bytes[StatPool::All].peak == static_cast<int64_t>(2 * kMiB));
  a->reset_accumulated_stats();
  s = a->stats();
  CHECK(s.allocated_bytes[StatPool::All].allocated == 0);
  CHECK(s.allocated_bytes[StatPool::All].freed == 0);
  CHECK(s.num_device_alloc == 0);
  CHECK(s.allocated_bytes[StatPool::All].current == static_cast<int64_t>(2 * kMiB));  // current untouched
  a->free(q);
}

TEST_CASE("empty_cache releases whole segments only") {
  TestAllocator a;
  void* keep = a->allocate(4 * kKiB);        // small segment stays (in use)
  void* gone = a->allocate(5 * kMiB);        // large segment, freed: released
  a->free(gone);
  CHECK(a.current(&MemoryStats::segment) == 2);
  a->empty_cache();
  CHECK(a.current(&MemoryStats::segment) == 1);
  CHECK(a.current(&MemoryStats::reserved_bytes) == static_cast<int64_t>(2 * kMiB));
  CHECK(a->stats().num_device_free == 1);
  CHECK(a.source->live_bytes() == 2 * kMiB);
  a->free(keep);
  a->empty_cache();
  CHECK(a.current(&MemoryStats::reserved_bytes) == 0);
  CHECK(a.source->live_bytes() == 0);
}

TEST_CASE("free of an unknown or already freed pointer is an error") {
  TestAllocator a;
  void* p = a->allocate(100);
  a->free(p);
  CHECK_THROWS_WITH_AS(a->free(p), doctest::Contains("free: "), Error);
  CHECK_THROWS_WITH_AS(a->free(p), doctest::Contains("is not a live allocation of the cpu caching allocator"), Error);
  int local = 0;
  CHECK_THROWS_AS(a->free(&local), Error);
  a->free(nullptr);  // freeing null does nothing, as free() does
}
