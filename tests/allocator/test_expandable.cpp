// Expandable segments on the host source (2 MiB pages, as CUDA's): a segment grows by mapping
// pages, freed space merges with the free tail and is reused in place, pages that hold nothing
// live move to where a segment grows (once the event recorded at their free has completed:
// test_expandable_events.cpp covers the pending cases), empty_cache unmaps and releases, out of
// memory retries and then fails cleanly, record_stream keeps a block's pages, private pools and
// sources without virtual memory keep classic segments. Every figure is exact: the host source
// keeps the books a driver would.
#include <cstring>
#include <string>
#include <vector>

#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr size_t kPage = 2 * kMiB;
constexpr size_t kCapacity = 64 * kMiB;  // address space of a segment: 9/8 of it, 72 MiB

AllocatorConfig expandable_config() {
  AllocatorConfig config;
  config.expandable_segments = true;
  return config;
}

/// Writes every byte of [p, p + bytes) and reads it back: a page that is not mapped would
/// fault (and AddressSanitizer would name it).
bool write_all(void* p, size_t bytes, unsigned char value) {
  std::memset(p, value, bytes);
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; i += 4096)
    if (b[i] != value || b[bytes - 1] != value) return false;
  return true;
}

std::vector<AddressRange> ranges_of(CachingAllocator& a, const void* p) { return segment_of(a, p).mapped_ranges; }

bool same_ranges(const std::vector<AddressRange>& got, const std::vector<AddressRange>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].address != want[i].address || got[i].size != want[i].size) return false;
  return true;
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("expandable: a segment grows page by page; reserved bytes are the mapped pages") {
  TestAllocator a(kCapacity, expandable_config());
  void* p = a->allocate(3 * kMiB);
  {
    const MemoryStats s = a->stats();
    CHECK(s.segment[StatPool::Large].current == 1);
    CHECK(s.reserved_bytes[StatPool::Large].current == i64(2 * kPage));  // 3 MiB touches 2 pages
    CHECK(s.allocated_bytes[StatPool::Large].current == i64(3 * kMiB));
    // The free half of the second page is the only cached memory that cannot be unmapped.
    CHECK(s.inactive_split_bytes[StatPool::Large].current == i64(1 * kMiB));
    CHECK(s.inactive_split[StatPool::Large].current == 1);
    CHECK(s.num_device_alloc == 2);
    CHECK(s.num_map_calls == 2);
    CHECK(s.num_unmap_calls == 0);
  }
  CHECK(a.source->pages() == 2);
  CHECK(a.source->mapped_pages() == 2);
  CHECK(a.source->reservations() == 1);
  CHECK(a.source->live_bytes() == 2 * kPage);

  // The next block follows: one more page, and the shared page is no longer half free.
  void* q = a->allocate(3 * kMiB);
  CHECK(addr(q) == addr(p) + 3 * kMiB);
  {
    const MemoryStats s = a->stats();
    CHECK(s.reserved_bytes[StatPool::All].current == i64(3 * kPage));
    CHECK(s.inactive_split_bytes[StatPool::All].current == 0);
    CHECK(s.inactive_split[StatPool::All].current == 0);
    CHECK(s.num_device_alloc == 3);
    CHECK(s.num_map_calls == 3);
  }
  CHECK(write_all(p, 3 * kMiB, 0x11));
  CHECK(write_all(q, 3 * kMiB, 0x22));

  const SegmentInfo seg = segment_of(*a.allocator, p);
  CHECK(seg.is_expandable);
  CHECK(seg.is_large);
  CHECK(seg.address == addr(p));
  CHECK(seg.address % kPage == 0);
  CHECK(seg.total_size == 72 * kMiB);
  CHECK(seg.page_size == kPage);
  CHECK(seg.mapped_size == 3 * kPage);
  CHECK(same_ranges(seg.mapped_ranges, {{addr(p), 3 * kPage}}));
  REQUIRE(seg.blocks.size() == 3);
  CHECK(seg.blocks[2].state == BlockState::Inactive);
  CHECK(seg.blocks[2].size == 66 * kMiB);  // the rest of the address range, one free block

  // The small pool has an expandable segment of its own.
  void* r = a->allocate(1000);
  const SegmentInfo small = segment_of(*a.allocator, r);
  CHECK(small.is_expandable);
  CHECK_FALSE(small.is_large);
  CHECK(small.mapped_size == kPage);
  CHECK(a->stats().segment[StatPool::Small].current == 1);
  CHECK(a->stats().inactive_split_bytes[StatPool::Small].current == i64(kPage - 1024));
  CHECK(a.source->reservations() == 2);
  for (void* x : {p, q, r}) a->free(x);
}

TEST_CASE("expandable: freed space merges with the free tail and is reused in place") {
  // Classic segments: a 12 MiB segment cannot serve 14 MiB, so a second one is made.
  TestAllocator classic(kCapacity);
  void* c1 = classic->allocate(12 * kMiB);
  classic->free(c1);
  void* c2 = classic->allocate(14 * kMiB);
  CHECK(classic.current(&MemoryStats::reserved_bytes) == i64(26 * kMiB));
  classic->free(c2);

  TestAllocator a(kCapacity, expandable_config());
  void* x = a->allocate(12 * kMiB);
  a->free(x);
  // The freed block merged into the free rest of the range: its pages stay mapped, cached.
  CHECK(segment_of(*a.allocator, x).blocks.size() == 1);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(12 * kMiB));
  CHECK(a.current(&MemoryStats::inactive_split_bytes) == 0);
  void* y = a->allocate(14 * kMiB);
  CHECK(y == x);  // the same place, grown by one page
  const MemoryStats s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(14 * kMiB));
  CHECK(s.num_device_alloc == 7);
  CHECK(s.num_unmap_calls == 0);
  CHECK(write_all(y, 14 * kMiB, 0x33));
  a->free(y);
}

TEST_CASE("expandable: pages with nothing live move to where the segment grows once their stream is done with them") {
  TestAllocator a(kCapacity, expandable_config());
  void* a1 = a->allocate(4 * kMiB);  // pages 0-1
  void* a2 = a->allocate(4 * kMiB);  // pages 2-3
  CHECK(write_all(a2, 4 * kMiB, 0x5A));
  a->free(a1);  // pages 0-1 hold nothing live now; the 4 MiB hole is too small for 6 MiB
  CHECK(a.source->live_events() == 1);  // recorded at the free, for both pages
  a.source->complete_all_events();      // the work queued before the free has run
  void* z = a->allocate(6 * kMiB);  // pages 4-6: two moved from the hole, one created
  CHECK(addr(z) == addr(a2) + 4 * kMiB);
  MemoryStats s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(5 * kPage));
  CHECK(s.num_device_alloc == 5);
  CHECK(s.num_device_free == 0);
  CHECK(s.num_unmap_calls == 2);
  CHECK(s.num_map_calls == 7);
  CHECK(s.num_unmap_waits == 0);
  CHECK(a.source->waited_events() == 0);  // the move asked whether the event had completed, never waited
  CHECK(a.source->live_events() == 0);    // the event went back to the source
  CHECK(a.source->pages() == 5);
  CHECK(same_ranges(ranges_of(*a.allocator, a2), {{addr(a2), 5 * kPage}}));
  CHECK(write_all(z, 6 * kMiB, 0x6B));
  // a2's bytes never moved.
  const auto* b = static_cast<const unsigned char*>(a2);
  CHECK(b[0] == 0x5A);
  CHECK(b[4 * kMiB - 1] == 0x5A);

  // The hole is the best fit for 4 MiB again: its pages come back from the device (no page
  // elsewhere holds nothing live).
  void* a3 = a->allocate(4 * kMiB);
  CHECK(a3 == a1);
  s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(7 * kPage));
  CHECK(s.num_device_alloc == 7);
  CHECK(s.num_unmap_calls == 2);
  CHECK(write_all(a3, 4 * kMiB, 0x7C));
  for (void* p : {a2, z, a3}) a->free(p);
}

TEST_CASE("expandable: empty_cache unmaps cached pages, then releases an empty segment's address range") {
  TestAllocator a(kCapacity, expandable_config());
  void* p = a->allocate(3 * kMiB);  // pages 0-1
  void* q = a->allocate(5 * kMiB);  // pages 1-3
  a->free(q);
  MemoryStats s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(4 * kPage));
  CHECK(s.inactive_split_bytes[StatPool::All].current == i64(1 * kMiB));  // page 1's free half
  CHECK(s.inactive_split[StatPool::All].current == 1);

  a->empty_cache();  // pages 2-3 hold nothing live: unmapped and given back
  s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == i64(2 * kPage));
  CHECK(s.num_device_free == 2);
  CHECK(s.num_unmap_calls == 2);
  CHECK(s.segment[StatPool::All].current == 1);
  CHECK(s.inactive_split_bytes[StatPool::All].current == i64(1 * kMiB));  // page 1 still holds p
  CHECK(a.source->pages() == 2);
  CHECK(same_ranges(ranges_of(*a.allocator, p), {{addr(p), 2 * kPage}}));
  CHECK(write_all(p, 3 * kMiB, 0x44));

  a->free(p);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(2 * kPage));  // cached until asked
  a->empty_cache();
  s = a->stats();
  CHECK(s.reserved_bytes[StatPool::All].current == 0);
  CHECK(s.segment[StatPool::All].current == 0);
  CHECK(s.inactive_split_bytes[StatPool::All].current == 0);
  CHECK(s.num_device_free == 4);
  CHECK(s.num_device_alloc == s.num_device_free);
  CHECK(a.source->reservations() == 0);
  CHECK(a.source->live_bytes() == 0);
  CHECK(a->snapshot().segments.empty());
}

TEST_CASE("expandable: out of memory releases cached memory and retries; then fails, keeping what is live") {
  // Classic small segments (small pool not expandable) hold cached memory the large pool needs.
  AllocatorConfig config = expandable_config();
  config.expandable_small_pool = false;
  TestAllocator a(16 * kMiB, config);
  std::vector<void*> small;
  for (int i = 0; i < 4; ++i) small.push_back(a->allocate(1 * kMiB));  // two 2 MiB classic segments
  for (void* p : small) a->free(p);
  CHECK(a.current(&MemoryStats::reserved_bytes, StatPool::Small) == i64(4 * kMiB));
  // 14 MiB needs 7 pages; 6 fit beside the cached small segments: retry after releasing them.
  void* big = a->allocate(14 * kMiB);
  MemoryStats s = a->stats();
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.num_ooms == 0);
  CHECK(s.reserved_bytes[StatPool::Small].current == 0);
  CHECK(s.reserved_bytes[StatPool::Large].current == i64(14 * kMiB));
  CHECK(s.num_device_alloc == 2 + 6 + 7);  // two segments, six pages, then seven
  CHECK(s.num_device_free == 2 + 6);
  CHECK(write_all(big, 14 * kMiB, 0x55));
  a->free(big);
  a->empty_cache();

  // More than the device holds: an OutOfMemoryError after the retry, and nothing lost.
  TestAllocator b(16 * kMiB, expandable_config());
  void* keep = b->allocate(4 * kMiB);
  std::memset(keep, 0x66, 4 * kMiB);
  const MemoryStats before = b->stats();
  std::string msg;
  try {
    b->allocate(20 * kMiB, 0, "expandable_oom_test");
    FAIL_CHECK("no OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.rfind("expandable_oom_test: out of memory on cpu: tried to allocate 20.00 MiB", 0) == 0);
  CHECK(msg.find("Expandable segments are on") != std::string::npos);
  s = b->stats();
  CHECK(s.num_ooms == 1);
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.reserved_bytes[StatPool::All].current == before.reserved_bytes[StatPool::All].current);
  CHECK(s.allocated_bytes[StatPool::All].current == i64(4 * kMiB));
  CHECK(b.source->pages() == 2);  // what the failed attempts mapped went back to the device
  const auto* k = static_cast<const unsigned char*>(keep);
  CHECK(k[0] == 0x66);
  CHECK(k[4 * kMiB - 1] == 0x66);
  void* later = b->allocate(8 * kMiB);  // smaller requests still work
  CHECK(write_all(later, 8 * kMiB, 0x77));
  b->free(later);
  b->free(keep);
}

TEST_CASE("expandable: record_stream keeps a freed block's pages until the other stream is done") {
  TestAllocator a(kCapacity, expandable_config());  // manual events
  void* p = a->allocate(4 * kMiB, 1);
  a->record_stream(p, 2);
  a->free(p);
  CHECK(block_at(*a.allocator, p).state == BlockState::AwaitingFree);
  // Stream 2 grows its own segment: p's pages are still in use, so none can move.
  void* q = a->allocate(6 * kMiB, 2);
  MemoryStats s = a->stats();
  CHECK(s.num_unmap_calls == 0);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(5 * kPage));
  CHECK(s.segment[StatPool::All].current == 2);
  CHECK(segment_of(*a.allocator, q).stream == 2);
  CHECK(a.source->is_mapped(p, 4 * kMiB));

  // Stream 2 is done: the next allocation processes the event and frees p, which records an
  // event on p's own stream 1 (its work queued before the free may still run).
  a.source->complete_all_events();
  void* small = a->allocate(1000, 2);
  CHECK(block_at(*a.allocator, p).state == BlockState::Inactive);
  CHECK(a.source->pending_events() == 1);
  a.source->complete_all_events();  // stream 1 is done too
  void* r = a->allocate(2 * kMiB, 2);  // p's pages are free to move
  CHECK(addr(r) == addr(q) + 6 * kMiB);
  s = a->stats();
  CHECK(s.num_unmap_calls == 1);  // one of p's pages moved to stream 2's segment
  CHECK(s.reserved_bytes[StatPool::All].current == i64(6 * kPage));  // and a page for the small block
  CHECK(s.num_unmap_waits == 0);
  CHECK(a.source->waited_events() == 0);
  CHECK(write_all(r, 2 * kMiB, 0x12));
  a->free(small);
  a->free(q);
  a->free(r);
  a->empty_cache();
  CHECK(a.source->live_bytes() == 0);
  CHECK(a.source->reservations() == 0);
}

TEST_CASE("expandable: private pools (CUDA Graph capture) and sources without virtual memory keep classic segments") {
  TestAllocator a(kCapacity, expandable_config());
  const MemPoolId pool = a->create_pool();
  a->begin_allocate_to_pool(pool, 5);
  void* x = a->allocate(3 * kMiB, 5);
  a->end_allocate_to_pool(pool);
  const SegmentInfo seg = segment_of(*a.allocator, x);
  CHECK_FALSE(seg.is_expandable);
  CHECK(seg.pool_id == pool);
  CHECK(seg.total_size == 20 * kMiB);
  CHECK(seg.mapped_size == 20 * kMiB);
  a->free(x);
  a->release_pool(pool);

  TestAllocator plain(kCapacity, expandable_config(), true, /*vmm_granularity=*/0);
  void* y = plain->allocate(3 * kMiB);
  const SegmentInfo classic = segment_of(*plain.allocator, y);
  CHECK_FALSE(classic.is_expandable);
  CHECK(classic.total_size == 20 * kMiB);
  CHECK(plain->stats().num_map_calls == 0);
  plain->free(y);

  // Without caching every block is its own segment, expandable segments or not.
  AllocatorConfig uncached = expandable_config();
  uncached.caching = false;
  TestAllocator u(kCapacity, uncached);
  void* z = u->allocate(3 * kMiB);
  CHECK_FALSE(segment_of(*u.allocator, z).is_expandable);
  u->free(z);
  CHECK(u.current(&MemoryStats::reserved_bytes) == 0);
}

TEST_CASE("expandable: the history records pages mapped and unmapped") {
  TestAllocator a(kCapacity, expandable_config());
  a->record_history(true);
  void* p = a->allocate(3 * kMiB);
  a->free(p);
  a->empty_cache();
  const MemorySnapshot snap = a->snapshot();
  std::vector<TraceAction> actions;
  for (const TraceEntry& e : snap.history) actions.push_back(e.action);
  const std::vector<TraceAction> want = {TraceAction::SegmentMap, TraceAction::Alloc, TraceAction::FreeCompleted,
                                         TraceAction::SegmentUnmap};
  CHECK(actions == want);
  REQUIRE(snap.history.size() == 4);
  CHECK(snap.history[0].address == addr(p));
  CHECK(snap.history[0].size == 2 * kPage);
  CHECK(snap.history[3].size == 2 * kPage);
}
