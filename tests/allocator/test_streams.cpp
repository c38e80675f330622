// Streams on the host test double: a block belongs to the stream it was allocated on, and a
// block used by other streams (record_stream) waits for their events before reuse. Events are
// completed by hand (manual_events), so every state in between can be checked exactly.
#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr StreamId kS1 = 1, kS2 = 2, kS3 = 3;

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("a freed block is reused by its own stream only") {
  TestAllocator a;
  void* p = a->allocate(4 * kKiB, kS1);
  a->free(p);
  // Stream 2 cannot take stream 1's cached block: it gets a segment of its own.
  void* q = a->allocate(4 * kKiB, kS2);
  CHECK(q != p);
  CHECK(segment_of(*a.allocator, q).address != segment_of(*a.allocator, p).address);
  CHECK(a.current(&MemoryStats::segment) == 2);
  CHECK(segment_of(*a.allocator, p).stream == kS1);
  CHECK(segment_of(*a.allocator, q).stream == kS2);
  // Stream 1 gets its block back.
  void* r = a->allocate(4 * kKiB, kS1);
  CHECK(r == p);
  CHECK(a.current(&MemoryStats::segment) == 2);

  // The same holds in the large pool, and for the default stream 0.
  void* big1 = a->allocate(5 * kMiB, kS1);
  a->free(big1);
  void* big0 = a->allocate(5 * kMiB);
  CHECK(big0 != big1);
  CHECK(a.current(&MemoryStats::segment, StatPool::Large) == 2);
  a->free(big0);
  CHECK(a->allocate(5 * kMiB, kS1) == big1);
  CHECK(a->allocate(5 * kMiB, 0) == big0);
  CHECK(a.current(&MemoryStats::segment, StatPool::Large) == 2);
  for (void* x : {q, r, big0, big1}) a->free(x);
}

TEST_CASE("record_stream: a freed block awaits the other stream's event, then returns and merges") {
  TestAllocator a;
  a->record_history(true);
  void* p = a->allocate(4 * kKiB, kS1);
  a->record_stream(p, kS2);
  a->free(p);

  // Freed by the user, but the event on stream 2 has not completed: awaiting free. It stays
  // active; it is no longer an allocation.
  CHECK(a.source->pending_events() == 1);
  CHECK(block_at(*a.allocator, p).state == BlockState::AwaitingFree);
  CHECK(block_at(*a.allocator, p).size == 4 * kKiB);
  {
    const MemoryStats s = a->stats();
    CHECK(s.allocation[StatPool::All].current == 0);
    CHECK(s.allocated_bytes[StatPool::All].current == 0);
    CHECK(s.requested_bytes[StatPool::All].current == 0);
    CHECK(s.active[StatPool::Small].current == 1);
    CHECK(s.active_bytes[StatPool::Small].current == i64(4 * kKiB));
    CHECK(s.inactive_split[StatPool::Small].current == 1);  // only the segment's free tail
    CHECK(s.inactive_split_bytes[StatPool::Small].current == i64(2 * kMiB - 4 * kKiB));
    const SegmentInfo seg = segment_of(*a.allocator, p);
    CHECK(seg.allocated_size == 0);
    CHECK(seg.active_size == 4 * kKiB);
  }

  // Not reused while the event is pending: the same request on stream 1 gets the next block.
  void* q = a->allocate(4 * kKiB, kS1);
  CHECK(q == static_cast<char*>(p) + 4 * kKiB);
  CHECK(block_at(*a.allocator, p).state == BlockState::AwaitingFree);
  a->free(q);  // merges with the free tail; p's block still waits

  // The event completes: the next allocator call returns the block to the cache, where it
  // merges with the free rest into one whole segment; the request then takes it again.
  a.source->complete_all_events();
  void* r = a->allocate(4 * kKiB, kS1);
  CHECK(r == p);
  CHECK(a.source->pending_events() == 0);
  CHECK(a.current(&MemoryStats::segment) == 1);
  a->free(r);  // no record_stream this time: straight back to the cache
  {
    const MemoryStats s = a->stats();
    CHECK(s.active[StatPool::All].current == 0);
    CHECK(s.active_bytes[StatPool::All].current == 0);
    CHECK(s.inactive_split[StatPool::All].current == 0);
    CHECK(s.inactive_split_bytes[StatPool::All].current == 0);
  }
  const SegmentInfo seg = segment_of(*a.allocator, p);
  REQUIRE(seg.blocks.size() == 1);
  CHECK(seg.blocks[0].size == 2 * kMiB);
  CHECK(seg.blocks[0].state == BlockState::Inactive);

  // History: the user's free of p is "free_requested"; its return to the cache comes later.
  std::vector<TraceAction> for_p;
  for (const TraceEntry& e : a->snapshot().history)
    if (e.address == addr(p) && e.action != TraceAction::SegmentAlloc) for_p.push_back(e.action);
  REQUIRE(for_p.size() >= 3);
  CHECK(for_p[0] == TraceAction::Alloc);
  CHECK(for_p[1] == TraceAction::FreeRequested);
  CHECK(for_p[2] == TraceAction::FreeCompleted);
}

TEST_CASE("record_stream with the block's own stream is a no-op") {
  TestAllocator a;
  void* p = a->allocate(4 * kKiB, kS1);
  a->record_stream(p, kS1);
  a->free(p);
  CHECK(a.source->pending_events() == 0);
  CHECK(block_at(*a.allocator, p).state == BlockState::Inactive);
  CHECK(a.current(&MemoryStats::active) == 0);
  CHECK(a->allocate(4 * kKiB, kS1) == p);
  a->free(p);
}

TEST_CASE("record_stream: one event per distinct stream, and the block waits for all of them") {
  TestAllocator a;
  void* p = a->allocate(64 * kKiB, kS1);
  a->record_stream(p, kS2);
  a->record_stream(p, kS2);  // recorded once
  a->free(p);
  CHECK(a.source->pending_events() == 1);
  a.source->complete_all_events();
  CHECK(a->allocate(64 * kKiB, kS1) == p);

  // Two streams: two events. The source numbers its events 1, 2, ... in order, and these
  // are the 2nd and 3rd recorded by this source.
  a->record_stream(p, kS2);
  a->record_stream(p, kS3);
  a->free(p);
  CHECK(a.source->pending_events() == 2);
  a.source->complete_event(2);
  void* q = a->allocate(64 * kKiB, kS1);  // processes events: one still pending
  CHECK(q != p);
  CHECK(block_at(*a.allocator, p).state == BlockState::AwaitingFree);
  CHECK(a.source->pending_events() == 1);
  a.source->complete_event(3);
  void* r = a->allocate(64 * kKiB, kS1);
  CHECK(r == p);
  CHECK(a.source->pending_events() == 0);
  a->free(q);
  a->free(r);
  CHECK(a.current(&MemoryStats::active) == 0);
}

TEST_CASE("empty_cache waits for pending events, then releases the segment") {
  TestAllocator a;
  void* p = a->allocate(5 * kMiB, kS1);  // a 20 MiB large segment
  void* s = a->allocate(100, kS1);       // a 2 MiB small segment
  a->record_stream(p, kS2);
  a->record_stream(s, kS3);
  a->free(p);
  a->free(s);
  CHECK(a.source->pending_events() == 2);
  CHECK(a.current(&MemoryStats::active) == 2);
  CHECK(a.current(&MemoryStats::reserved_bytes) == i64(22 * kMiB));
  a->empty_cache();
  CHECK(a.source->pending_events() == 0);
  CHECK(a.current(&MemoryStats::active) == 0);
  CHECK(a.current(&MemoryStats::segment) == 0);
  CHECK(a.current(&MemoryStats::reserved_bytes) == 0);
  CHECK(a->stats().num_device_free == 2);
  CHECK(a.source->live_bytes() == 0);
}

TEST_CASE("record_stream on a pointer that is not a live allocation is an error") {
  TestAllocator a;
  int local = 0;
  CHECK_THROWS_WITH_AS(a->record_stream(&local, kS2), doctest::Contains("record_stream: "), Error);
  void* p = a->allocate(512, kS1);
  // An address inside a block is not the block.
  CHECK_THROWS_WITH_AS(a->record_stream(static_cast<char*>(p) + 8, kS2), doctest::Contains("record_stream: "), Error);
  a->free(p);
  CHECK_THROWS_WITH_AS(a->record_stream(p, kS2),
                       doctest::Contains("is not a live allocation of the cpu caching allocator"), Error);
  CHECK(a.source->pending_events() == 0);
}

TEST_CASE("a tensor's block (allocate_data): found by record_stream, freed by its DataPtr, not by free()") {
  TestAllocator a;
  void* before = a->allocate(4 * kKiB, kS1);  // a raw neighbour in the same segment
  {
    DataPtr d = a->allocate_data(8 * kKiB, kS1, "test");
    REQUIRE(d.get() == static_cast<char*>(before) + 4 * kKiB);
    CHECK(a.current(&MemoryStats::allocation) == 2);
    // free(ptr) is for raw allocations only: a tensor's memory goes back when its DataPtr dies.
    CHECK_THROWS_WITH_AS(a->free(d.get()), doctest::Contains("is not a live allocation"), Error);
    // record_stream finds the block by walking its segment; an address inside it is refused.
    a->record_stream(d.get(), kS2);
    CHECK_THROWS_WITH_AS(a->record_stream(static_cast<char*>(d.get()) + 512, kS2),
                         doctest::Contains("record_stream: "), Error);
  }
  // The DataPtr's free waits for stream 2's event, exactly like a raw free after record_stream.
  CHECK(a.current(&MemoryStats::allocation) == 1);
  CHECK(a.source->pending_events() == 1);
  CHECK(block_at(*a.allocator, static_cast<char*>(before) + 4 * kKiB).state == BlockState::AwaitingFree);
  a.source->complete_all_events();
  void* again = a->allocate(8 * kKiB, kS1);
  CHECK(again == static_cast<char*>(before) + 4 * kKiB);
  a->free(again);
  a->free(before);
  CHECK(a.current(&MemoryStats::active) == 0);
  CHECK(a.current(&MemoryStats::inactive_split) == 0);
}
