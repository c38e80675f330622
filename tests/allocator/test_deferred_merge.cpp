// The deferred merge of the latest freed block (caching_allocator.cpp, flush_deferred) is
// bookkeeping only: an allocator with it and one without, fed the same random operations,
// must hand out the same addresses, record the same history, keep the same statistics to
// every peak and total, and show the same blocks in every snapshot.
#include <sys/mman.h>

#include <map>
#include <random>
#include <vector>

#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

/// Host segments at increasing addresses of one reserved range, so two allocators see their
/// segments in the same address order (best fit breaks size ties by address). Pages are
/// never touched; release() keeps the range. Events are the host double's, by hand.
class OrderedSegments : public HostSegmentSource {
 public:
  static constexpr size_t kRange = size_t{1} << 36;
  OrderedSegments() : HostSegmentSource(Options{0, true}) {
    void* p = mmap(nullptr, kRange, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(p != MAP_FAILED);
    base_ = static_cast<char*>(p);
  }
  ~OrderedSegments() override { munmap(base_, kRange); }
  void* allocate(size_t bytes) override {
    if (used_ + bytes > kRange) return nullptr;
    void* p = base_ + used_;
    used_ += (bytes + 4095) / 4096 * 4096;
    return p;
  }
  void release(void*, size_t) override {}

 private:
  char* base_ = nullptr;
  size_t used_ = 0;
};

/// A caching allocator over OrderedSegments.
struct OrderedAllocator {
  OrderedSegments* source;
  std::unique_ptr<CachingAllocator> allocator;
  explicit OrderedAllocator(AllocatorConfig config) {
    auto src = std::make_unique<OrderedSegments>();
    source = src.get();
    allocator = std::make_unique<CachingAllocator>(std::move(src), config);
  }
  CachingAllocator* operator->() { return allocator.get(); }
};

/// Addresses as (segment ordinal, offset): the two allocators' segments come from different
/// host memory, in the same order. A segment's ordinal counts the history's SegmentAlloc
/// entries, so a segment that reuses a released one's address gets a new ordinal.
class Normalizer {
 public:
  std::pair<size_t, uint64_t> operator()(CachingAllocator& a, uint64_t address) {
    const MemorySnapshot snap = a.snapshot();
    update(snap);
    for (const SegmentInfo& seg : snap.segments)
      if (address >= seg.address && address < seg.address + seg.total_size)
        return {ordinals_.at(seg.address), address - seg.address};
    FAIL("no segment holds " << address);
    return {};
  }
  void update(const MemorySnapshot& snap) {
    for (; seen_ < snap.history.size(); ++seen_)
      if (snap.history[seen_].action == TraceAction::SegmentAlloc) ordinals_[snap.history[seen_].address] = next_++;
  }
  size_t ordinal(uint64_t base) const { return ordinals_.at(base); }

 private:
  std::map<uint64_t, size_t> ordinals_;
  size_t seen_ = 0, next_ = 0;
};

void check_same_stats(const MemoryStats& x, const MemoryStats& y) {
  const StatArray MemoryStats::*arrays[] = {&MemoryStats::allocation,     &MemoryStats::allocated_bytes,
                                            &MemoryStats::segment,        &MemoryStats::reserved_bytes,
                                            &MemoryStats::active,         &MemoryStats::active_bytes,
                                            &MemoryStats::inactive_split, &MemoryStats::inactive_split_bytes,
                                            &MemoryStats::requested_bytes};
  for (const auto member : arrays) {
    for (size_t p = 0; p < 3; ++p) {
      const Stat& s = (x.*member).pools[p];
      const Stat& t = (y.*member).pools[p];
      CHECK(s.current == t.current);
      CHECK(s.peak == t.peak);
      CHECK(s.allocated == t.allocated);
      CHECK(s.freed == t.freed);
    }
  }
  for (const Stat MemoryStats::*member : {&MemoryStats::oversize_allocations, &MemoryStats::oversize_segments}) {
    CHECK((x.*member).current == (y.*member).current);
    CHECK((x.*member).peak == (y.*member).peak);
  }
}

struct Layout {
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t, int>> blocks;  // offset, size, requested, state
  bool operator==(const Layout&) const = default;
};

std::map<size_t, Layout> layouts(CachingAllocator& a, Normalizer& norm) {
  std::map<size_t, Layout> out;
  const MemorySnapshot snap = a.snapshot();
  norm.update(snap);
  for (const SegmentInfo& seg : snap.segments) {
    Layout& l = out[norm.ordinal(seg.address)];
    for (const BlockInfo& b : seg.blocks)
      l.blocks.emplace_back(b.address - seg.address, b.size, b.requested_size, static_cast<int>(b.state));
  }
  return out;
}

}  // namespace

TEST_CASE("deferred merges change nothing a user can see: addresses, history, statistics, snapshots") {
  for (const size_t max_split : {std::numeric_limits<size_t>::max(), size_t{4} * kMiB}) {
    CAPTURE(max_split);
    AllocatorConfig deferring, eager;
    deferring.max_split_size = eager.max_split_size = max_split;
    eager.defer_merges = false;
    OrderedAllocator a(deferring), b(eager);
    a->record_history(true, 1 << 20);  // keeps every entry of the run
    b->record_history(true, 1 << 20);
    Normalizer na, nb;
    std::mt19937_64 rng(20261130);
    struct Live {
      void* pa;
      void* pb;
      size_t bytes;
      StreamId stream;
    };
    std::vector<Live> live;
    for (int op = 0; op < 4000; ++op) {
      const uint64_t r = rng() % 100;
      if (r < 55 || live.empty()) {
        // Mostly small and repeated sizes (the pattern the deferral serves), some large.
        const uint64_t kind = rng() % 10;
        const size_t bytes = kind < 6   ? 512 * (1 + rng() % 4)
                             : kind < 9 ? 1 + rng() % (256 * kKiB)
                                        : 1 + rng() % (12 * kMiB);
        const StreamId stream = 1 + rng() % 2;
        void* pa = a->allocate(bytes, stream);
        void* pb = b->allocate(bytes, stream);
        const auto wa = na(*a.allocator, reinterpret_cast<uint64_t>(pa));
        const auto wb = nb(*b.allocator, reinterpret_cast<uint64_t>(pb));
        INFO("op " << op << ", " << bytes << " bytes on stream " << stream << ": segment " << wa.first << " + "
                   << wa.second << " with deferral, segment " << wb.first << " + " << wb.second << " without");
        REQUIRE(wa == wb);
        live.push_back({pa, pb, bytes, stream});
      } else if (r < 70) {
        // The eager pattern: a temporary dies and the next op asks for the same size.
        Live& l = live[rng() % live.size()];
        a->free(l.pa);
        b->free(l.pb);
        l.pa = a->allocate(l.bytes, l.stream);
        l.pb = b->allocate(l.bytes, l.stream);
        REQUIRE(na(*a.allocator, reinterpret_cast<uint64_t>(l.pa)) ==
                nb(*b.allocator, reinterpret_cast<uint64_t>(l.pb)));
      } else if (r < 95) {
        const size_t i = rng() % live.size();
        if (rng() % 8 == 0) {  // used by another stream first: its free waits for an event
          a->record_stream(live[i].pa, 3);
          b->record_stream(live[i].pb, 3);
        }
        a->free(live[i].pa);
        b->free(live[i].pb);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        a.source->complete_all_events();
        b.source->complete_all_events();
      }
      if (op % 97 == 0) {
        check_same_stats(a->stats(), b->stats());
        REQUIRE(layouts(*a.allocator, na) == layouts(*b.allocator, nb));
      }
      if (op == 2000) {
        a->empty_cache();
        b->empty_cache();
      }
    }
    check_same_stats(a->stats(), b->stats());
    REQUIRE(layouts(*a.allocator, na) == layouts(*b.allocator, nb));
    // The deferral was exercised (and only where it is on).
    MESSAGE("allocations served by a deferred merge: " << a->deferred_reuses());
    CHECK(a->deferred_reuses() > 100);
    CHECK(b->deferred_reuses() == 0);
    const auto ha = a->snapshot().history, hb = b->snapshot().history;
    REQUIRE(ha.size() == hb.size());
    for (size_t i = 0; i < ha.size(); ++i) {
      CHECK(ha[i].action == hb[i].action);
      CHECK(ha[i].size == hb[i].size);
      CHECK(ha[i].stream == hb[i].stream);
    }
    for (const Live& l : live) {
      a->free(l.pa);
      b->free(l.pb);
    }
  }
}
