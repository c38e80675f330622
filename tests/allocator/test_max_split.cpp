// max_split_size keeps big cached blocks whole: requests below it never take them, oversize
// requests never split them nor take one 20 MiB or more larger than themselves. Exact
// oversize statistics, and the fragmentation the setting prevents on one interleaved workload.
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr size_t kMaxSplit = 40 * kMiB;

AllocatorConfig max_split(size_t bytes = kMaxSplit) {
  AllocatorConfig c;
  c.max_split_size = bytes;
  return c;
}

void check_stat(const Stat& s, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
  CHECK(s.current == current);
  CHECK(s.peak == peak);
  CHECK(s.allocated == allocated);
  CHECK(s.freed == freed);
}

bool inside(const void* p, const void* base, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
  return a >= b && a < b + bytes;
}

}  // namespace

TEST_CASE("an oversize request takes a cached block of max_split_size or more whole, never split") {
  TestAllocator a(0, max_split());
  void* p = a->allocate(60 * kMiB);  // a 60 MiB segment
  a->free(p);
  // 44 MiB >= max_split_size: the 60 MiB block is within 20 MiB of it, so it is taken, whole.
  void* q = a->allocate(44 * kMiB);
  CHECK(q == p);
  const MemoryStats s = a->stats();
  CHECK(s.allocated_bytes[StatPool::Large].current == i64(60 * kMiB));
  CHECK(s.requested_bytes[StatPool::Large].current == i64(44 * kMiB));
  CHECK(s.inactive_split[StatPool::All].current == 0);
  CHECK(s.inactive_split_bytes[StatPool::All].current == 0);
  CHECK(s.segment[StatPool::All].current == 1);
  const MemorySnapshot snap = a->snapshot();
  REQUIRE(snap.segments.size() == 1);
  REQUIRE(snap.segments[0].blocks.size() == 1);
  CHECK(snap.segments[0].blocks[0].size == 60 * kMiB);
  CHECK(snap.segments[0].blocks[0].requested_size == 44 * kMiB);
  CHECK(snap.segments[0].blocks[0].state == BlockState::Active);
  a->free(q);

  // Without max_split_size the same request splits the block: 44 MiB used, 16 MiB cached.
  TestAllocator d;
  void* dp = d->allocate(60 * kMiB);
  d->free(dp);
  CHECK(d->allocate(44 * kMiB) == dp);
  CHECK(d.current(&MemoryStats::allocated_bytes) == i64(44 * kMiB));
  CHECK(d.current(&MemoryStats::inactive_split) == 1);
  CHECK(d.current(&MemoryStats::inactive_split_bytes) == i64(16 * kMiB));
  d->free(dp);
}

TEST_CASE("requests below max_split_size never take a cached block of max_split_size or more") {
  TestAllocator a(0, max_split());
  void* big = a->allocate(kMaxSplit);  // exactly max_split_size: a 40 MiB segment
  a->free(big);

  // A 5 MiB request fits the cached 40 MiB block, but gets a 20 MiB segment of its own.
  void* small = a->allocate(5 * kMiB);
  CHECK_FALSE(inside(small, big, kMaxSplit));
  CHECK(a.current(&MemoryStats::segment) == 2);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(60 * kMiB));
  CHECK(a.current(&MemoryStats::inactive_split_bytes) == i64(15 * kMiB));  // only the new segment's rest
  a->free(small);

  // 30 MiB (from 10 MiB on, segments fit the request): the cached 20 MiB block is too small,
  // the 40 MiB one is kept whole, so a 30 MiB segment is made.
  void* mid = a->allocate(30 * kMiB);
  CHECK_FALSE(inside(mid, big, kMaxSplit));
  CHECK(a.current(&MemoryStats::segment) == 3);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(90 * kMiB));
  CHECK(a->stats().num_device_alloc == 3);
  // The 40 MiB block is still one whole free block.
  int found = 0;
  for (const SegmentInfo& seg : a->snapshot().segments)
    if (seg.address == reinterpret_cast<uintptr_t>(big)) {
      ++found;
      REQUIRE(seg.blocks.size() == 1);
      CHECK(seg.blocks[0].state == BlockState::Inactive);
      CHECK(seg.blocks[0].size == kMaxSplit);
    }
  CHECK(found == 1);
  a->free(mid);

  // One step below max_split_size, a cached block is an ordinary one: taken and split.
  TestAllocator b(0, max_split());
  void* below = b->allocate(38 * kMiB);  // a 38 MiB segment
  b->free(below);
  CHECK(b->allocate(5 * kMiB) == below);
  CHECK(b.current(&MemoryStats::segment) == 1);
  CHECK(b.current(&MemoryStats::inactive_split_bytes) == i64(33 * kMiB));
  b->free(below);
}

TEST_CASE("an oversize request does not take a cached block 20 MiB or more larger than itself") {
  TestAllocator a(0, max_split());
  void* p70 = a->allocate(70 * kMiB);
  a->free(p70);
  // 70 MiB >= 50 MiB + 20 MiB: too wasteful, a 50 MiB segment is made instead.
  void* p50 = a->allocate(50 * kMiB);
  CHECK(p50 != p70);
  CHECK_FALSE(inside(p50, p70, 70 * kMiB));
  CHECK(a.current(&MemoryStats::segment) == 2);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(120 * kMiB));
  a->free(p50);
  // 70 MiB < 51 MiB + 20 MiB: taken, whole (the 50 MiB block is too small for 51 MiB).
  void* p51 = a->allocate(51 * kMiB);
  CHECK(p51 == p70);
  CHECK(a.current(&MemoryStats::allocated_bytes) == i64(70 * kMiB));
  // 50 MiB takes its exact cached block.
  void* again = a->allocate(50 * kMiB);
  CHECK(again == p50);
  CHECK(a->stats().num_device_alloc == 2);
  CHECK(a.current(&MemoryStats::inactive_split) == 0);
  a->free(p51);
  a->free(again);

  // Without max_split_size the 50 MiB request splits the 70 MiB block instead.
  TestAllocator d;
  void* d70 = d->allocate(70 * kMiB);
  d->free(d70);
  CHECK(d->allocate(50 * kMiB) == d70);
  CHECK(d.current(&MemoryStats::segment) == 1);
  CHECK(d.current(&MemoryStats::inactive_split_bytes) == i64(20 * kMiB));
  d->free(d70);
}

TEST_CASE("oversize_allocations and oversize_segments: current, peak, allocated, freed") {
  TestAllocator a(0, max_split());
  CHECK(a->stats().max_split_size == i64(kMaxSplit));
  void* p = a->allocate(50 * kMiB);  // oversize segment (50 MiB) and allocation
  void* q = a->allocate(44 * kMiB);  // another of each
  void* s = a->allocate(5 * kMiB);   // 20 MiB segment, 5 MiB block: neither
  {
    const MemoryStats st = a->stats();
    check_stat(st.oversize_allocations, 2, 2, 2, 0);
    check_stat(st.oversize_segments, 2, 2, 2, 0);
  }
  a->free(p);
  {
    const MemoryStats st = a->stats();
    check_stat(st.oversize_allocations, 1, 2, 2, 1);
    check_stat(st.oversize_segments, 2, 2, 2, 0);  // the segment stays cached
  }
  void* r = a->allocate(45 * kMiB);  // takes the cached 50 MiB block: no new segment
  CHECK(r == p);
  void* t = a->allocate(41 * kMiB);  // a 42 MiB segment: the third oversize segment
  {
    const MemoryStats st = a->stats();
    check_stat(st.oversize_allocations, 3, 3, 4, 1);
    check_stat(st.oversize_segments, 3, 3, 3, 0);
    CHECK(st.num_device_alloc == 4);
    // The oversize blocks were never split: each is its whole segment.
    CHECK(st.allocated_bytes[StatPool::Large].current == i64(50 * kMiB + 44 * kMiB + 5 * kMiB + 42 * kMiB));
  }
  for (void* x : {q, s, r, t}) a->free(x);
  {
    const MemoryStats st = a->stats();
    check_stat(st.oversize_allocations, 0, 3, 4, 4);
    check_stat(st.oversize_segments, 3, 3, 3, 0);
  }
  a->empty_cache();
  {
    const MemoryStats st = a->stats();
    check_stat(st.oversize_segments, 0, 3, 3, 3);
    CHECK(st.reserved_bytes[StatPool::All].current == 0);
  }
  a->reset_peak_stats();
  a->reset_accumulated_stats();
  {
    const MemoryStats st = a->stats();
    check_stat(st.oversize_allocations, 0, 0, 0, 0);
    check_stat(st.oversize_segments, 0, 0, 0, 0);
  }

  // Without max_split_size nothing is oversize, and stats() reports it as -1 (PyTorch's value).
  TestAllocator d;
  void* big = d->allocate(100 * kMiB);
  const MemoryStats ds = d->stats();
  CHECK(ds.max_split_size == -1);
  check_stat(ds.oversize_allocations, 0, 0, 0, 0);
  check_stat(ds.oversize_segments, 0, 0, 0, 0);
  d->free(big);
}

namespace {
// An interleaved workload: a short-lived 60 MiB buffer each step, and a 5 MiB buffer that
// lives on, allocated right after the big one is freed (so it finds it cached).
std::vector<void*> run_interleaved(CachingAllocator& a) {
  std::vector<void*> keep;
  for (int i = 0; i < 4; ++i) {
    void* big = a.allocate(60 * kMiB);
    a.free(big);
    keep.push_back(a.allocate(5 * kMiB));
  }
  return keep;
}
}  // namespace

TEST_CASE("the same interleaved workload fragments without max_split_size and not with it") {
  // Without: the first 5 MiB buffer splits the cached 60 MiB block; every later big buffer
  // needs a second 60 MiB segment, and the first keeps a 40 MiB free piece no one can release.
  TestAllocator without;
  std::vector<void*> keep_without = run_interleaved(*without.allocator);
  const MemoryStats sw = without->stats();
  CHECK(sw.reserved_bytes[StatPool::All].current == i64(120 * kMiB));
  CHECK(sw.allocated_bytes[StatPool::All].current == i64(20 * kMiB));
  CHECK(sw.inactive_split[StatPool::All].current == 1);
  CHECK(sw.inactive_split_bytes[StatPool::All].current == i64(40 * kMiB));
  CHECK(sw.num_device_alloc == 2);

  // With max_split_size 40 MiB: the 60 MiB block stays whole and serves every big buffer; the
  // 5 MiB buffers pack one 20 MiB segment exactly.
  TestAllocator with(0, max_split());
  std::vector<void*> keep_with = run_interleaved(*with.allocator);
  const MemoryStats sm = with->stats();
  CHECK(sm.reserved_bytes[StatPool::All].current == i64(80 * kMiB));
  CHECK(sm.allocated_bytes[StatPool::All].current == i64(20 * kMiB));
  CHECK(sm.inactive_split[StatPool::All].current == 0);
  CHECK(sm.inactive_split_bytes[StatPool::All].current == 0);
  CHECK(sm.num_device_alloc == 2);
  for (size_t i = 1; i < keep_with.size(); ++i)  // consecutive in one segment
    CHECK(static_cast<char*>(keep_with[i]) - static_cast<char*>(keep_with[i - 1]) == i64(5 * kMiB));

  // The effect: less reserved, no non-releasable memory, and empty_cache() can give back
  // the big block (without max_split_size it is pinned by the small buffers inside it).
  CHECK(sm.reserved_bytes[StatPool::All].current < sw.reserved_bytes[StatPool::All].current);
  CHECK(sm.inactive_split_bytes[StatPool::All].current < sw.inactive_split_bytes[StatPool::All].current);
  without->empty_cache();
  with->empty_cache();
  CHECK(without.current(&MemoryStats::reserved_bytes) == i64(60 * kMiB));
  CHECK(with.current(&MemoryStats::reserved_bytes) == i64(20 * kMiB));

  for (void* p : keep_without) without->free(p);
  for (void* p : keep_with) with->free(p);
}

// A request just below max_split_size whose segment, rounded up to 2 MiB, reaches
// max_split_size: its own freed segment is no larger than the segment it would get anyway,
// so it may take it again; otherwise every allocate/free cycle would add a 40 MiB segment.
TEST_CASE("a request just below max_split_size reuses its cached segment on the next cycle") {
  TestAllocator a(0, max_split());
  void* first = a->allocate(38 * kMiB + 1);  // rounded segment: 40 MiB == max_split_size
  a->free(first);
  for (int i = 0; i < 3; ++i) {
    void* p = a->allocate(38 * kMiB + 1);
    CHECK(p == first);
    a->free(p);
  }
  CHECK(a->stats().num_device_alloc == 1);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(40 * kMiB));
  // A request that would get a smaller segment (20 MiB) still leaves the 40 MiB block alone.
  void* small = a->allocate(5 * kMiB);
  CHECK_FALSE(inside(small, first, 40 * kMiB));
  a->free(small);
}
