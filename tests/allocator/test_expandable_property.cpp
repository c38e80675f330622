// Expandable segments against classic ones, on the same random program: allocations of 1 B to
// 40 MiB on two streams, frees, record_stream with events completed later, empty_cache now
// and then. Both allocators must hold the same live blocks (counts, requested bytes, active
// blocks) after every step; the expandable one must never hand out overlapping blocks, keep
// every byte of every block in use mapped (each block is written in full when it is handed
// out, so an unmapped byte faults, and AddressSanitizer names it), and keep statistics that
// agree with its snapshot and with the host source's books (allocator_consistency.h). Run with
// 2 MiB pages (CUDA's) and 64 KiB pages (more blocks share a page).
#include <random>

#include "allocator_consistency.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr size_t kCapacity = 2048 * kMiB;  // no OOM: both allocators run the whole program
constexpr int kSteps = 3000;
constexpr int kCheckEvery = 25;

size_t draw_request(std::mt19937_64& rng) {
  if (rng() % 50 == 0) return 20 * kMiB + rng() % (20 * kMiB);  // rare oversize requests
  return draw_size(rng);
}

void run_differential(size_t granularity, uint64_t seed) {
  AllocatorConfig expandable;
  expandable.expandable_segments = true;
  TestAllocator e(kCapacity, expandable, /*manual_events=*/true, granularity);
  TestAllocator c(kCapacity, AllocatorConfig{}, /*manual_events=*/true, granularity);
  std::mt19937_64 rng(seed);
  struct Pair {
    Live e;
    void* c;
  };
  std::vector<Pair> live;
  std::vector<Live> e_live;  // the expandable allocator's blocks, for the consistency check
  uint64_t tag = 1;
  int corrupted = 0, errors = 0;
  for (int step = 0; step < kSteps; ++step) {
    const unsigned op = static_cast<unsigned>(rng() % 100);
    if (live.empty() || op < 52) {
      const size_t bytes = draw_request(rng);
      const StreamId stream = rng() % 4 == 0 ? 1 : 0;
      void* pe = e->allocate(bytes, stream);
      void* pc = c->allocate(bytes, stream);
      std::memset(pe, 0xA5, bytes);  // every byte: a page missing under it faults here
      Live b{pe, bytes, tag++, stream};
      pattern(b, true);
      live.push_back({b, pc});
    } else if (op < 95) {
      const size_t i = static_cast<size_t>(rng() % live.size());
      const Pair p = live[i];
      corrupted += pattern(p.e, false) != 0;
      if (rng() % 8 == 0) {  // used by the other stream: both wait for its event
        const StreamId other = p.e.stream == 0 ? 1 : 0;
        e->record_stream(p.e.ptr, other);
        c->record_stream(p.c, other);
      }
      e->free(p.e.ptr);
      c->free(p.c);
      live[i] = live.back();
      live.pop_back();
    } else if (op < 99) {
      e.source->complete_all_events();
      c.source->complete_all_events();
    } else {
      e->empty_cache();
      c->empty_cache();
    }
    const MemoryStats se = e->stats(), sc = c->stats();
    if (se.allocation[StatPool::All].current != sc.allocation[StatPool::All].current ||
        se.requested_bytes[StatPool::All].current != sc.requested_bytes[StatPool::All].current ||
        se.active[StatPool::All].current != sc.active[StatPool::All].current) {
      FAIL_CHECK("step " << step << ": the two allocators hold different live blocks");
      ++errors;
    }
    if ((step + 1) % kCheckEvery == 0 || step + 1 == kSteps) {
      e_live.clear();
      for (const Pair& p : live) e_live.push_back(p.e);
      for (const std::string& err : consistency_errors(*e.allocator, *e.source, {&e_live})) {
        if (errors++ < 10) FAIL_CHECK("step " << step << ": " << err);
      }
    }
    if (errors > 10) break;
  }
  CHECK(errors == 0);
  CHECK(corrupted == 0);
  const MemoryStats se = e->stats(), sc = c->stats();
  MESSAGE("pages of " << granularity / kKiB << " KiB: peak reserved " << se.reserved_bytes[StatPool::All].peak
                      << " expandable, " << sc.reserved_bytes[StatPool::All].peak << " classic; "
                      << se.num_map_calls << " pages mapped, " << se.num_unmap_calls << " unmapped");
  CHECK(se.num_map_calls > 0);
  CHECK(se.num_unmap_calls > 0);  // pages moved, and empty_cache unmapped some
  for (const Pair& p : live) {
    e->free(p.e.ptr);
    c->free(p.c);
  }
  e.source->complete_all_events();
  e->empty_cache();
  const MemoryStats end = e->stats();
  CHECK(end.reserved_bytes[StatPool::All].current == 0);
  CHECK(end.inactive_split_bytes[StatPool::All].current == 0);
  CHECK(end.segment[StatPool::All].current == 0);
  CHECK(end.num_device_alloc == end.num_device_free);
  CHECK(e.source->live_bytes() == 0);
  CHECK(e.source->reservations() == 0);
  CHECK(e.source->live_events() == 0);  // every event recorded at a free went back
}

}  // namespace

TEST_CASE("expandable vs classic on one random program: same live blocks, no overlap, every byte in use mapped") {
  SUBCASE("2 MiB pages") { run_differential(2 * kMiB, 0xe4a11); }
  SUBCASE("64 KiB pages") { run_differential(64 * kKiB, 0x64c0de); }
}
