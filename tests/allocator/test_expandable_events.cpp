// Expandable segments never block in the steady state: a free that leaves pages with no live
// byte records one event on the segment's stream, and a page moves elsewhere only once that
// event has completed (asked without waiting); otherwise a new page is created. Only a device
// out of memory makes the host wait, for the events of the oldest free pages, before the
// out-of-memory retry. The host source's events stay pending until a test completes them, as
// a GPU running behind the host would leave them, so every case here is exact: which pages
// move, how many are created, how many events are alive, how many waits.
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "allocator/memory_report.h"
#include "allocator_consistency.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr size_t kPage = 2 * kMiB;

AllocatorConfig expandable_config() {
  AllocatorConfig config;
  config.expandable_segments = true;
  return config;
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

/// Fills [p, p + bytes) with `value`.
void fill(void* p, size_t bytes, unsigned char value) { std::memset(p, value, bytes); }

/// True when every byte of [p, p + bytes) is `value`.
bool holds(const void* p, size_t bytes, unsigned char value) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i)
    if (b[i] != value) return false;
  return true;
}

}  // namespace

TEST_CASE("expandable events: one per free that empties pages, none for a free that empties none") {
  TestAllocator a(64 * kMiB, expandable_config());
  void* p = a->allocate(6 * kMiB);  // pages 0-2
  void* q = a->allocate(1 * kMiB);  // page 3
  void* r = a->allocate(1 * kMiB);  // page 3
  a->free(q);                       // page 3 still holds r: no page emptied, no event
  CHECK(a.source->live_events() == 0);
  a->free(p);  // pages 0-2 emptied: one event for the three
  CHECK(a.source->live_events() == 1);
  CHECK(a.source->pending_events() == 1);

  // Reused in place on its own stream, a page needs no event: stream order covers the work
  // queued before the free. The last page to let go of the event gives it back.
  void* x = a->allocate(2 * kMiB);  // page 0
  CHECK(x == p);
  CHECK(a.source->live_events() == 1);
  void* y = a->allocate(4 * kMiB);  // pages 1-2
  CHECK(addr(y) == addr(p) + 2 * kMiB);
  CHECK(a.source->live_events() == 0);
  const MemoryStats s = a->stats();
  CHECK(s.num_device_alloc == 4);
  CHECK(s.num_unmap_calls == 0);
  CHECK(s.num_unmap_waits == 0);
  CHECK(a.source->waited_events() == 0);
  for (void* b : {x, y, r}) a->free(b);
  a.source->complete_all_events();
  a->empty_cache();
  CHECK(a.source->live_events() == 0);
  CHECK(a.source->live_bytes() == 0);
}

TEST_CASE("expandable events: a free page whose event is pending stays; a new page is created, with no wait") {
  TestAllocator a(64 * kMiB, expandable_config());
  void* a1 = a->allocate(4 * kMiB);  // pages 0-1
  void* a2 = a->allocate(4 * kMiB);  // pages 2-3
  fill(a2, 4 * kMiB, 0x5A);
  a->free(a1);  // the 4 MiB hole is too small for 6 MiB; its pages' event is pending
  void* z = a->allocate(6 * kMiB);  // pages 4-6, all three new
  CHECK(addr(z) == addr(a2) + 4 * kMiB);
  MemoryStats s = a->stats();
  CHECK(s.num_device_alloc == 7);
  CHECK(s.num_unmap_calls == 0);
  CHECK(s.num_unmap_waits == 0);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(7 * kPage));
  CHECK(a.source->waited_events() == 0);
  CHECK(a.source->is_mapped(a1, 4 * kMiB));  // the hole's pages stay where the GPU may still use them
  fill(z, 6 * kMiB, 0x6B);

  // Once the GPU has run the work queued before the free, the hole's pages move.
  a.source->complete_all_events();
  void* w = a->allocate(6 * kMiB);  // pages 7-9: two moved from the hole, one created
  CHECK(addr(w) == addr(z) + 6 * kMiB);
  s = a->stats();
  CHECK(s.num_device_alloc == 8);
  CHECK(s.num_unmap_calls == 2);
  CHECK(s.num_unmap_waits == 0);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(8 * kPage));
  CHECK(a.source->waited_events() == 0);
  CHECK(a.source->live_events() == 0);
  CHECK_FALSE(a.source->is_mapped(a1, kPage));
  fill(w, 6 * kMiB, 0x7C);
  CHECK(holds(a2, 4 * kMiB, 0x5A));
  CHECK(holds(z, 6 * kMiB, 0x6B));
  for (void* p : {a2, z, w}) a->free(p);
}

TEST_CASE("expandable events: pages of a stream whose work is done move, those of a stream still busy stay") {
  TestAllocator a(64 * kMiB, expandable_config());
  void* b1 = a->allocate(4 * kMiB, 1);
  void* b2 = a->allocate(4 * kMiB, 2);
  a->free(b1);  // freed first: the older pages, but stream 1 is still busy with them
  a->free(b2);
  a.source->complete_event(a.source->last_event());  // stream 2 is done
  void* c = a->allocate(4 * kMiB, 0);  // takes stream 2's pages
  const MemoryStats s = a->stats();
  CHECK(s.num_device_alloc == 4);
  CHECK(s.num_unmap_calls == 2);
  CHECK(s.num_unmap_waits == 0);
  CHECK(segment_of(*a.allocator, b1).mapped_size == 2 * kPage);
  CHECK(segment_of(*a.allocator, b2).mapped_size == 0);
  CHECK(segment_of(*a.allocator, c).mapped_size == 2 * kPage);
  CHECK(a.source->pending_events() == 1);  // stream 1's
  a->free(c);
  a.source->complete_all_events();
  a->empty_cache();
  CHECK(a.source->live_events() == 0);
  CHECK(a->stats().num_unmap_waits == 0);
}

TEST_CASE("expandable events: out of memory, the host waits for the oldest free pages before it retries") {
  // 20 MiB: 10 pages, segments of 24 MiB of address space.
  TestAllocator a(20 * kMiB, expandable_config());
  void* a1 = a->allocate(4 * kMiB);   // pages 0-1
  void* a2 = a->allocate(14 * kMiB);  // pages 2-8
  fill(a2, 14 * kMiB, 0x21);
  a->free(a1);  // pending
  void* z = a->allocate(6 * kMiB);  // pages 9-11 at the tail: one created (the last the device has), two waited for
  CHECK(addr(z) == addr(a2) + 14 * kMiB);
  MemoryStats s = a->stats();
  CHECK(s.num_device_alloc == 10);
  CHECK(s.num_unmap_calls == 2);
  CHECK(s.num_unmap_waits == 1);  // one event covered both pages
  CHECK(a.source->waited_events() == 1);
  CHECK(s.num_alloc_retries == 0);
  CHECK(s.num_ooms == 0);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(20 * kMiB));
  CHECK(a.source->live_events() == 0);
  fill(z, 6 * kMiB, 0x22);
  CHECK(holds(a2, 14 * kMiB, 0x21));

  // Waiting cannot cover 10 MiB (z's three pages are all there is): then the retry, then the
  // error, and nothing live is lost.
  a->free(z);  // pending
  CHECK_THROWS_WITH_AS(a->allocate(10 * kMiB, 0, "events_oom"), doctest::Contains("events_oom: out of memory on cpu"),
                       OutOfMemoryError);
  s = a->stats();
  CHECK(s.num_unmap_waits == 2);  // z's event, waited for before the retry
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.num_ooms == 1);
  CHECK(s.reserved_bytes[StatPool::All].current == i64(14 * kMiB));  // the failed attempts gave back what they mapped
  CHECK(s.allocated_bytes[StatPool::All].current == i64(14 * kMiB));
  CHECK(holds(a2, 14 * kMiB, 0x21));
  CHECK(a.source->live_events() == 0);
  a->free(a2);
}

TEST_CASE("expandable events: empty_cache waits only for the events still pending, once each") {
  TestAllocator a(64 * kMiB, expandable_config());
  void* p1 = a->allocate(4 * kMiB);
  void* p2 = a->allocate(4 * kMiB);
  void* p3 = a->allocate(4 * kMiB);
  a->free(p1);
  a->free(p3);
  CHECK(a.source->pending_events() == 2);
  a->empty_cache();
  CHECK(a->stats().num_unmap_waits == 2);
  CHECK(a.source->waited_events() == 2);
  CHECK(a->stats().reserved_bytes[StatPool::All].current == i64(2 * kPage));
  const std::string line = expandable_summary(a->snapshot());
  INFO(line);
  CHECK(line.find("6 pages mapped and 4 unmapped so far, 2 waits for the GPU before unmapping.") != std::string::npos);
  a->free(p2);
  a.source->complete_all_events();  // nothing pending: nothing to wait for
  a->empty_cache();
  CHECK(a->stats().num_unmap_waits == 2);
  CHECK(a.source->waited_events() == 2);
  CHECK(a->stats().reserved_bytes[StatPool::All].current == 0);
  CHECK(a.source->live_events() == 0);
  CHECK(a.source->reservations() == 0);
}

TEST_CASE("expandable events: during a capture no event is recorded or asked; frees record theirs after it") {
  TestAllocator a(64 * kMiB, expandable_config());
  constexpr StreamId kCapture = 3;
  void* x = a->allocate(4 * kMiB, kCapture);  // the captured stream's expandable segment: pages 0-1
  void* v = a->allocate(4 * kMiB, 0);         // stream 0's: pages 0-1
  void* u = a->allocate(2 * kMiB, 0);         // page 2
  const MemPoolId pool = a->create_pool();
  a->begin_allocate_to_pool(pool, kCapture);
  // Recording an event on the captured stream would put it into the graph, and CUDA forbids
  // event queries and waits while a capture is underway: these frees record nothing yet.
  a->free(x);
  a->free(v);
  CHECK(a.source->live_events() == 0);
  void* y = a->allocate(6 * kMiB, 0);  // pages 3-5: no free page is known idle, three new ones
  CHECK(a->stats().num_device_alloc == 8);
  CHECK(a->stats().num_unmap_calls == 0);
  a->empty_cache();  // nothing it could unmap without asking
  CHECK(a->stats().reserved_bytes[StatPool::All].current == i64(8 * kPage));
  a->end_allocate_to_pool(pool);

  // Too large for v's hole: pages 6-8. x's and v's events are recorded now, pending: new pages.
  void* z = a->allocate(6 * kMiB, 0);
  CHECK(a.source->live_events() == 2);
  CHECK(a.source->pending_events() == 2);
  CHECK(a->stats().num_device_alloc == 11);
  CHECK(a->stats().num_unmap_calls == 0);
  a.source->complete_all_events();
  void* w = a->allocate(6 * kMiB, 0);  // pages 9-11: x's two pages (freed first) and v's first move
  CHECK(a->stats().num_device_alloc == 11);
  CHECK(a->stats().num_unmap_calls == 3);
  CHECK(a->stats().num_unmap_waits == 0);
  CHECK(segment_of(*a.allocator, x).mapped_size == 0);
  CHECK_FALSE(a.source->is_mapped(v, kPage));
  CHECK(a.source->is_mapped(static_cast<char*>(v) + kPage, kPage));
  for (void* p : {u, y, z, w}) a->free(p);
  a->release_pool(pool);
  a.source->complete_all_events();
  a->empty_cache();
  CHECK(a.source->live_events() == 0);
  CHECK(a.source->live_bytes() == 0);
  CHECK(a.source->reservations() == 0);
}

TEST_CASE("expandable events: a random program on a device too small for it, with a GPU running behind") {
  // Events complete kLag steps after they are recorded; live bytes stay under three quarters
  // of the device, so pages move without waiting, are created, are waited for when it is
  // full, and a few requests fail. The allocator must stay consistent with its snapshot and the source's
  // books, keep every block's bytes, and give every event back.
  constexpr size_t kCapacity = 96 * kMiB;
  constexpr size_t kLiveLimit = 72 * kMiB;
  constexpr int kSteps = 4000;
  constexpr size_t kLag = 16;
  TestAllocator a(kCapacity, expandable_config());
  std::mt19937_64 rng(0xe7e27);
  std::vector<Live> live;
  std::deque<EventId> recorded_by;
  size_t live_bytes = 0, ooms = 0;
  uint64_t tag = 1;
  int corrupted = 0, errors = 0;
  for (int step = 0; step < kSteps && errors <= 10; ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 100);
    if (live.empty() || (op < 55 && live_bytes < kLiveLimit)) {
      const size_t bytes = draw_size(rng);
      const StreamId stream = rng() % 3 == 0 ? 1 : 0;
      try {
        void* p = a->allocate(bytes, stream);
        Live b{p, bytes, tag++, stream};
        pattern(b, true);
        live.push_back(b);
        live_bytes += bytes;
      } catch (const OutOfMemoryError&) {
        ++ooms;
      }
    } else if (op < 99) {
      const size_t i = static_cast<size_t>(rng() % live.size());
      const Live b = live[i];
      corrupted += pattern(b, false) != 0;
      if (rng() % 8 == 0) a->record_stream(b.ptr, b.stream == 0 ? 1 : 0);
      a->free(b.ptr);
      live_bytes -= b.bytes;
      live[i] = live.back();
      live.pop_back();
    } else {
      a->empty_cache();
    }
    recorded_by.push_back(a.source->last_event());
    if (recorded_by.size() > kLag) {
      a.source->complete_events_through(recorded_by.front());
      recorded_by.pop_front();
    }
    if ((step + 1) % 25 == 0)
      for (const std::string& err : consistency_errors(*a.allocator, *a.source, {&live}))
        if (errors++ < 10) FAIL_CHECK("step " << step << ": " << err);
  }
  CHECK(errors == 0);
  CHECK(corrupted == 0);
  const MemoryStats s = a->stats();
  MESSAGE("peak reserved " << s.reserved_bytes[StatPool::All].peak << ", " << s.num_map_calls << " pages mapped, "
                           << s.num_unmap_calls << " unmapped, " << s.num_unmap_waits << " waits, " << ooms
                           << " requests failed");
  CHECK(s.num_unmap_calls > 0);
  CHECK(s.num_unmap_waits > 0);  // the device filled up, and the host waited rather than fail
  CHECK(s.num_unmap_waits < s.num_unmap_calls);
  for (const Live& b : live) a->free(b.ptr);
  a.source->complete_all_events();
  a->empty_cache();
  CHECK(a->stats().reserved_bytes[StatPool::All].current == 0);
  CHECK(a.source->live_events() == 0);
  CHECK(a.source->live_bytes() == 0);
  CHECK(a.source->reservations() == 0);
}
