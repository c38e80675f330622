// Private pools (what a CUDA Graph capture allocates from): a routed stream's allocations come
// from, and return to, the pool's own segments, invisible to every other allocation; a
// released pool gives each segment back as soon as it is empty, and then disappears.
#include <string>

#include <fmt/format.h>

#include "allocator/memory_report.h"
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr StreamId kCapture = 7, kOther = 8;

/// How many segments belong to pool `id` (0: the default pools).
size_t segments_of_pool(CachingAllocator& a, MemPoolId id) {
  size_t n = 0;
  for (const SegmentInfo& seg : a.snapshot().segments) n += seg.pool_id == id;
  return n;
}

}  // namespace

TEST_CASE("begin_allocate_to_pool routes one stream's allocations to the pool and its frees back to it") {
  TestAllocator a;
  // A default-pool block of the capture stream, cached before the capture begins.
  void* before = a->allocate(4 * kKiB, kCapture);
  a->free(before);

  const MemPoolId pool = a->create_pool();
  CHECK(pool != 0);
  a->begin_allocate_to_pool(pool, kCapture);
  void* p = a->allocate(4 * kKiB, kCapture);  // not the cached default block: a pool segment
  CHECK(p != before);
  CHECK(segment_of(*a.allocator, p).pool_id == pool);
  CHECK(segment_of(*a.allocator, p).stream == kCapture);
  void* big = a->allocate(5 * kMiB, kCapture);
  CHECK(segment_of(*a.allocator, big).pool_id == pool);
  CHECK(segment_of(*a.allocator, big).is_large);
  CHECK(segment_of(*a.allocator, big).total_size == 20 * kMiB);
  // Other streams keep the default pools.
  void* other = a->allocate(4 * kKiB, kOther);
  void* dflt = a->allocate(4 * kKiB);
  CHECK(segment_of(*a.allocator, other).pool_id == 0);
  CHECK(segment_of(*a.allocator, dflt).pool_id == 0);
  CHECK(segment_of(*a.allocator, before).pool_id == 0);
  CHECK(segments_of_pool(*a.allocator, pool) == 2);
  // The statistics count the pool's memory like any other.
  CHECK(a.current(&MemoryStats::segment) == 5);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(4 * 2 * kMiB + 20 * kMiB));
  CHECK(a.current(&MemoryStats::allocated_bytes) == i64(3 * 4 * kKiB + 5 * kMiB));

  // A freed pool block stays in the pool, and the next routed request takes it again.
  a->free(p);
  const SegmentInfo freed = segment_of(*a.allocator, p);
  CHECK(freed.pool_id == pool);
  REQUIRE(freed.blocks.size() == 1);
  CHECK(freed.blocks[0].state == BlockState::Inactive);
  void* again = a->allocate(4 * kKiB, kCapture);
  CHECK(again == p);
  a->free(again);

  // After end_allocate_to_pool the stream is back on the default pools: it takes its cached
  // default block, and never the pool's free one.
  a->end_allocate_to_pool(pool);
  void* after = a->allocate(4 * kKiB, kCapture);
  CHECK(after == before);
  void* after2 = a->allocate(4 * kKiB, kCapture);
  CHECK(after2 == static_cast<char*>(before) + 4 * kKiB);
  CHECK(segment_of(*a.allocator, after2).pool_id == 0);
  CHECK(segments_of_pool(*a.allocator, pool) == 2);  // the pool keeps its segments
  // The pool's blocks still go back to it when freed after routing stopped.
  a->free(big);
  CHECK(segment_of(*a.allocator, big).pool_id == pool);
  for (void* x : {other, dflt, after, after2}) a->free(x);
  a->release_pool(pool);
  CHECK(segments_of_pool(*a.allocator, pool) == 0);
}

TEST_CASE("two pools on two streams at once, each ended on its own") {
  TestAllocator a;
  const MemPoolId pa = a->create_pool(), pb = a->create_pool();
  CHECK(pa != pb);
  CHECK(pb != 0);
  a->begin_allocate_to_pool(pa, kCapture);
  a->begin_allocate_to_pool(pb, kOther);
  void* x = a->allocate(1 * kKiB, kCapture);
  void* y = a->allocate(1 * kKiB, kOther);
  CHECK(segment_of(*a.allocator, x).pool_id == pa);
  CHECK(segment_of(*a.allocator, y).pool_id == pb);
  a->end_allocate_to_pool(pa);
  void* x2 = a->allocate(1 * kKiB, kCapture);  // default pools now
  void* y2 = a->allocate(1 * kKiB, kOther);    // still pool b: its segment's next block
  CHECK(segment_of(*a.allocator, x2).pool_id == 0);
  CHECK(segment_of(*a.allocator, y2).pool_id == pb);
  CHECK(y2 == static_cast<char*>(y) + 1 * kKiB);
  for (void* p : {x, y, x2, y2}) a->free(p);
  a->release_pool(pa);
  a->release_pool(pb);
  a->empty_cache();
  CHECK(a.current(&MemoryStats::reserved_bytes) == 0);
}

TEST_CASE("release_pool: cached segments go at once, the others when their blocks are freed") {
  TestAllocator a;  // manual events
  const MemPoolId pool = a->create_pool();
  a->begin_allocate_to_pool(pool, kCapture);
  void* cached = a->allocate(5 * kMiB, kCapture);   // pool segment L1 (20 MiB), freed below
  void* small = a->allocate(4 * kKiB, kCapture);    // pool segment S1 (2 MiB)
  void* big = a->allocate(25 * kMiB, kCapture);     // pool segment L2 (26 MiB)
  void* waiting = a->allocate(64 * kKiB, kCapture); // in S1 too; freed after record_stream
  a->free(cached);
  void* dflt = a->allocate(4 * kKiB);  // a default segment, cached after this free
  a->free(dflt);
  REQUIRE(a.current(&MemoryStats::segment) == 4);
  REQUIRE(a.current(&MemoryStats::reserved_bytes) == i64(20 * kMiB + 2 * kMiB + 26 * kMiB + 2 * kMiB));

  a->release_pool(pool);
  // L1 was cached and whole: released now. S1 and L2 hold live blocks; the default segment
  // is not the pool's business.
  CHECK(a.current(&MemoryStats::segment) == 3);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(2 * kMiB + 26 * kMiB + 2 * kMiB));
  CHECK(a->stats().num_device_free == 1);
  CHECK(segments_of_pool(*a.allocator, pool) == 2);
  // Routing stopped with the release; the pool cannot be used again.
  CHECK_THROWS_WITH_AS(a->begin_allocate_to_pool(pool, kCapture),
                       doctest::Contains("begin_allocate_to_pool: pool"), Error);
  void* routed_no_more = a->allocate(4 * kKiB, kOther);
  CHECK(segment_of(*a.allocator, routed_no_more).pool_id == 0);
  a->free(routed_no_more);

  a->free(big);  // L2 empty: given back at once
  CHECK(a->stats().num_device_free == 2);
  CHECK(segments_of_pool(*a.allocator, pool) == 1);
  a->record_stream(waiting, kOther);
  a->free(waiting);
  a->free(small);  // S1 is not empty yet: `waiting` awaits its event
  CHECK(segments_of_pool(*a.allocator, pool) == 1);
  CHECK(a->stats().num_device_free == 2);
  a.source->complete_all_events();
  void* trigger = a->allocate(512);  // processes the event: S1 empties and goes
  CHECK(segments_of_pool(*a.allocator, pool) == 0);
  CHECK(a->stats().num_device_free == 3);
  a->free(trigger);
  // The pool is gone.
  CHECK_THROWS_WITH_AS(a->release_pool(pool), doctest::Contains("release_pool: pool"), Error);
  CHECK_THROWS_AS(a->begin_allocate_to_pool(pool, kCapture), Error);
  a->empty_cache();
  CHECK(a.current(&MemoryStats::reserved_bytes) == 0);
  CHECK(a.source->live_bytes() == 0);
}

TEST_CASE("release_pool of a pool that holds no segment removes it at once") {
  TestAllocator a;
  const MemPoolId pool = a->create_pool();
  a->begin_allocate_to_pool(pool, kCapture);
  a->release_pool(pool);
  void* p = a->allocate(4 * kKiB, kCapture);  // routing ended with the release
  CHECK(segment_of(*a.allocator, p).pool_id == 0);
  a->free(p);
  CHECK_THROWS_WITH_AS(a->release_pool(pool), doctest::Contains("does not exist or was already released"), Error);
}

TEST_CASE("private pool errors: unknown or released ids, a stream already routed") {
  TestAllocator a;
  CHECK_THROWS_WITH_AS(a->begin_allocate_to_pool(999, kCapture),
                       doctest::Contains("begin_allocate_to_pool: pool 999 does not exist or was released"), Error);
  CHECK_THROWS_WITH_AS(a->release_pool(999), doctest::Contains("release_pool: pool 999 does not exist"), Error);
  const MemPoolId p1 = a->create_pool(), p2 = a->create_pool();
  a->begin_allocate_to_pool(p1, kCapture);
  CHECK_THROWS_WITH_AS(a->begin_allocate_to_pool(p2, kCapture),
                       doctest::Contains("begin_allocate_to_pool: stream 0x7 already allocates to pool"), Error);
  CHECK_THROWS_WITH_AS(a->begin_allocate_to_pool(p1, kCapture), doctest::Contains("already allocates to pool"),
                       Error);
  // The failed calls changed nothing: the stream still allocates to p1.
  void* x = a->allocate(4 * kKiB, kCapture);
  CHECK(segment_of(*a.allocator, x).pool_id == p1);
  a->free(x);
  // Once routing ends, the stream may be routed again.
  a->end_allocate_to_pool(p1);
  a->begin_allocate_to_pool(p2, kCapture);
  void* y = a->allocate(4 * kKiB, kCapture);
  CHECK(segment_of(*a.allocator, y).pool_id == p2);
  a->free(y);
  a->release_pool(p1);
  a->release_pool(p2);
  CHECK(a.current(&MemoryStats::segment) == 0);
}

TEST_CASE("empty_cache and the OOM retry keep the cache of a pool that is not released") {
  TestAllocator a(40 * kMiB);
  const MemPoolId pool = a->create_pool();
  a->begin_allocate_to_pool(pool, kCapture);
  void* p = a->allocate(5 * kMiB, kCapture);  // a 20 MiB pool segment
  a->free(p);
  a->end_allocate_to_pool(pool);
  void* d = a->allocate(5 * kMiB);  // a 20 MiB default segment
  a->free(d);
  REQUIRE(a.current(&MemoryStats::reserved_bytes) == i64(40 * kMiB));
  a->empty_cache();
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(20 * kMiB));
  CHECK(segments_of_pool(*a.allocator, pool) == 1);
  // 22 MiB does not fit beside the pool's 20 MiB: the retry cannot take the pool's cache.
  CHECK_THROWS_AS(a->allocate(22 * kMiB), OutOfMemoryError);
  CHECK(segments_of_pool(*a.allocator, pool) == 1);
  // The pool's segment is still its own: a routed request reuses it.
  a->begin_allocate_to_pool(pool, kCapture);
  CHECK(a->allocate(5 * kMiB, kCapture) == p);
  a->free(p);
  a->release_pool(pool);
  CHECK(a.current(&MemoryStats::reserved_bytes) == 0);
  CHECK(a.source->live_bytes() == 0);
  // With the pool gone, the same request fits.
  void* q = a->allocate(22 * kMiB);
  a->free(q);
}

TEST_CASE("memory_summary lists each private pool with its segments, reserved and allocated bytes") {
  TestAllocator a;
  CHECK(private_pools_summary(a->snapshot()).empty());
  void* outside = a->allocate(4 * kKiB, kOther);
  const MemPoolId pool = a->create_pool();
  a->begin_allocate_to_pool(pool, kCapture);
  void* small = a->allocate(3 * kKiB, kCapture);  // a 2 MiB small-pool segment
  void* big = a->allocate(5 * kMiB, kCapture);    // a 20 MiB large-pool segment
  a->end_allocate_to_pool(pool);
  const std::string line = private_pools_summary(a->snapshot());
  CHECK(line == fmt::format("Private pools (CUDA graphs; counted in the table above):\n  pool {}: 2 segments, 22.0 MiB "
                            "reserved, 5.0 MiB allocated to tensors",
                            pool));
  CHECK(format_memory_summary(a->snapshot()).find(line) != std::string::npos);
  a->free(small);
  a->free(big);
  a->free(outside);
  a->release_pool(pool);
  CHECK(private_pools_summary(a->snapshot()).empty());
}
