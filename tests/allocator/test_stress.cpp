// Randomized stress: four threads share one allocator for 100,000 mixed-size operations.
// Every block carries a pattern of its own, checked before it is freed; between phases the
// snapshot must describe a consistent heap and agree with the statistics to the byte.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "allocator_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr int kThreads = 4;
constexpr int kOpsPerThread = 25000;  // 100,000 in all
constexpr int kPhaseOps = 5000;       // a consistency check every 5,000 operations per thread
constexpr size_t kMaxLive = 64;       // live blocks per thread, at most
// Small enough that the largest mixes of live blocks exhaust it now and then, so the
// release-and-retry path and OutOfMemoryError run concurrently with everything else.
constexpr size_t kCapacity = 448 * kMiB;

/// A block a thread holds.
struct Live {
  void* ptr;
  size_t bytes;
  uint64_t tag;  // thread and allocation number: the seed of its pattern
  StreamId stream;
};

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Writes (or, with `write` false, counts mismatches of) the block's pattern: every 8-byte
/// word up to 64 KiB; one word per 512 bytes up to 1 MiB, which still covers every place
/// another block could start (blocks start at multiples of 512); one word per 4 KiB page
/// above (to keep the run short). The last bytes always.
size_t pattern(const Live& b, bool write) {
  auto* base = static_cast<unsigned char*>(b.ptr);
  const size_t stride = b.bytes <= 64 * kKiB ? 8 : b.bytes <= kMiB ? 512 : 4096;
  size_t bad = 0;
  for (size_t off = 0; off + 8 <= b.bytes; off += stride) {
    const uint64_t v = mix(b.tag ^ (off * 0x100000001B3ull));
    if (write) {
      std::memcpy(base + off, &v, 8);
    } else {
      uint64_t got;
      std::memcpy(&got, base + off, 8);
      bad += got != v;
    }
  }
  for (size_t i = b.bytes & ~size_t{7}; i < b.bytes; ++i) {
    const auto v = static_cast<unsigned char>(mix(b.tag + i));
    if (write) base[i] = v;
    else bad += base[i] != v;
  }
  return bad;
}

/// 1 B to 12 MiB, skewed small: 88% up to 1 MiB (log-uniform), 10% 1-10 MiB, 2% 10-12 MiB.
size_t draw_size(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double r = u(rng);
  if (r < 0.88) return static_cast<size_t>(std::exp(u(rng) * std::log(double(kMiB))));  // [1, 1 MiB]
  if (r < 0.98) return kMiB + 1 + static_cast<size_t>(u(rng) * double(9 * kMiB - 1));
  return 10 * kMiB + static_cast<size_t>(u(rng) * double(2 * kMiB));
}

/// Everything that must hold of a quiescent allocator whose live blocks are `live` (all
/// threads' blocks); each violation is one line of the result.
std::vector<std::string> consistency_errors(CachingAllocator& a, const HostSegmentSource& source,
                                            const std::vector<const std::vector<Live>*>& live) {
  std::vector<std::string> err;
  auto expect = [&err](bool ok, const std::string& what) {
    if (!ok && err.size() < 20) err.push_back(what);
  };
  const MemorySnapshot snap = a.snapshot();
  const MemoryStats& s = snap.stats;

  struct Sums {
    int64_t segments = 0, reserved = 0, allocs = 0, allocated = 0, active = 0, active_bytes = 0, requested = 0,
            inactive_split = 0, inactive_split_bytes = 0;
  } sums[3];  // indexed like StatPool: all, large, small
  struct Span {
    uint64_t address, size, requested;
    StreamId stream;
  };
  std::vector<Span> active_blocks;
  uint64_t previous_end = 0;
  for (const SegmentInfo& seg : snap.segments) {
    expect(seg.address >= previous_end, "segments overlap or are out of address order");
    previous_end = seg.address + seg.total_size;
    expect(!seg.blocks.empty(), "a segment without blocks");
    uint64_t at = seg.address, total = 0, allocated = 0, active = 0, requested = 0;
    for (const BlockInfo& b : seg.blocks) {
      expect(b.address == at, fmt::format("block {:#x} does not follow its neighbour ({:#x})", b.address, at));
      expect(b.size > 0 && b.size % CachingAllocator::kMinBlockSize == 0, "block size not a positive multiple of 512");
      at = b.address + b.size;
      total += b.size;
      if (b.state == BlockState::Active) {
        allocated += b.size;
        requested += b.requested_size;
        active_blocks.push_back({b.address, b.size, b.requested_size, seg.stream});
      }
      if (b.state != BlockState::Inactive) active += b.size;
    }
    expect(total == seg.total_size, "block sizes do not add up to the segment size");
    expect(allocated == seg.allocated_size && active == seg.active_size && requested == seg.requested_size,
           "segment totals disagree with its blocks");
    for (Sums* p : {&sums[0], &sums[seg.is_large ? 1 : 2]}) {
      p->segments += 1;
      p->reserved += static_cast<int64_t>(seg.total_size);
      for (const BlockInfo& b : seg.blocks) {
        const auto size = static_cast<int64_t>(b.size);
        if (b.state == BlockState::Active) {
          p->allocs += 1;
          p->allocated += size;
          p->requested += static_cast<int64_t>(b.requested_size);
        }
        if (b.state != BlockState::Inactive) {
          p->active += 1;
          p->active_bytes += size;
        }
        if (b.state == BlockState::Inactive && seg.blocks.size() > 1) {
          p->inactive_split += 1;
          p->inactive_split_bytes += size;
        }
      }
    }
  }
  std::sort(active_blocks.begin(), active_blocks.end(),
            [](const Span& x, const Span& y) { return x.address < y.address; });
  for (size_t i = 1; i < active_blocks.size(); ++i)
    expect(active_blocks[i - 1].address + active_blocks[i - 1].size <= active_blocks[i].address,
           "two active blocks overlap");

  const StatPool pools[] = {StatPool::All, StatPool::Large, StatPool::Small};
  for (int i = 0; i < 3; ++i) {
    const StatPool p = pools[i];
    const std::string name = i == 0 ? "all" : i == 1 ? "large" : "small";
    expect(s.segment[p].current == sums[i].segments, name + ": segment count != snapshot segments");
    expect(s.reserved_bytes[p].current == sums[i].reserved, name + ": reserved_bytes != sum of segment sizes");
    expect(s.allocation[p].current == sums[i].allocs, name + ": allocation != active blocks");
    expect(s.allocated_bytes[p].current == sums[i].allocated, name + ": allocated_bytes != sum of active blocks");
    expect(s.requested_bytes[p].current == sums[i].requested, name + ": requested_bytes != sum of requests");
    expect(s.active[p].current == sums[i].active, name + ": active != active + awaiting blocks");
    expect(s.active_bytes[p].current == sums[i].active_bytes, name + ": active_bytes != their sizes");
    expect(s.inactive_split[p].current == sums[i].inactive_split,
           name + ": inactive_split != free blocks of split segments");
    expect(s.inactive_split_bytes[p].current == sums[i].inactive_split_bytes,
           name + ": inactive_split_bytes != their sizes");
    expect(s.allocated_bytes[p].current <= s.active_bytes[p].current &&
               s.active_bytes[p].current <= s.reserved_bytes[p].current,
           name + ": not allocated <= active <= reserved");
    expect(s.reserved_bytes[p].peak >= s.reserved_bytes[p].current, name + ": reserved peak below current");
  }
  expect(s.num_device_alloc - s.num_device_free == s.segment[StatPool::All].current,
         "device allocs - device frees != segments");
  expect(static_cast<int64_t>(source.live_bytes()) == s.reserved_bytes[StatPool::All].current,
         "the source's live bytes != reserved_bytes");

  // Every block the threads hold is an active block of the snapshot, as they asked for it.
  size_t held = 0;
  for (const std::vector<Live>* blocks : live)
    for (const Live& b : *blocks) {
      ++held;
      const auto it = std::lower_bound(active_blocks.begin(), active_blocks.end(), reinterpret_cast<uintptr_t>(b.ptr),
                                       [](const Span& x, uint64_t address) { return x.address < address; });
      const bool found = it != active_blocks.end() && it->address == reinterpret_cast<uintptr_t>(b.ptr);
      expect(found && it->requested == b.bytes && it->stream == b.stream,
             fmt::format("held block {} ({} bytes) is not an active block of that size and stream", b.ptr, b.bytes));
    }
  expect(held == active_blocks.size(), fmt::format("{} blocks held but {} active", held, active_blocks.size()));
  return err;
}

}  // namespace

TEST_CASE("stress: 4 threads, 100,000 mixed allocations and frees, consistent after every phase") {
  // Events complete at once (manual_events false): a block freed after record_stream waits
  // only until the next allocation processes its event.
  TestAllocator a(kCapacity, AllocatorConfig{}, /*manual_events=*/false);
  std::vector<std::vector<Live>> live(kThreads);
  std::vector<const std::vector<Live>*> live_views;
  for (const auto& v : live) live_views.push_back(&v);

  std::vector<std::string> errors;  // written by the barrier's completion step only
  int phases_checked = 0;
  auto check_phase = [&]() noexcept {
    try {
      for (std::string& e : consistency_errors(*a.allocator, *a.source, live_views))
        errors.push_back(fmt::format("phase {}: {}", phases_checked, e));
    } catch (const std::exception& e) {
      errors.push_back(fmt::format("phase {}: exception {}", phases_checked, e.what()));
    }
    ++phases_checked;
  };
  std::barrier sync(kThreads, check_phase);

  std::atomic<int64_t> corrupted{0}, ooms{0}, allocations{0}, frees{0}, recorded{0}, loop_ops{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;  // unexpected exceptions in the workers

  auto worker = [&](int t) {
    std::mt19937_64 rng(0x5eed0000 + static_cast<uint64_t>(t));
    std::vector<Live>& mine = live[static_cast<size_t>(t)];
    const StreamId own_stream = 100 + static_cast<StreamId>(t);
    uint64_t next_tag = static_cast<uint64_t>(t) << 48;
    auto release = [&](size_t i) {
      const Live b = mine[i];
      if (pattern(b, false) != 0) ++corrupted;
      if (rng() % 16 == 0) {  // another stream used it: it waits for that stream's event
        a->record_stream(b.ptr, b.stream == 0 ? own_stream : 0);
        ++recorded;
      }
      a->free(b.ptr);
      ++frees;
      mine[i] = mine.back();
      mine.pop_back();
    };
    for (int op = 0; op < kOpsPerThread; ++op) {
      try {
        const bool alloc = mine.empty() || (mine.size() < kMaxLive && rng() % 100 < 55);
        if (alloc) {
          const size_t bytes = draw_size(rng);
          const StreamId stream = rng() % 8 == 0 ? own_stream : 0;
          void* p = nullptr;
          try {
            p = a->allocate(bytes, stream);
          } catch (const OutOfMemoryError&) {
            ++ooms;
          }
          if (p != nullptr) {
            mine.push_back({p, bytes, next_tag++, stream});
            pattern(mine.back(), true);
            ++allocations;
          }
        } else {
          release(static_cast<size_t>(rng() % mine.size()));
        }
        ++loop_ops;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(failures_mutex);
        failures.push_back(e.what());
      }
      if ((op + 1) % kPhaseOps == 0) sync.arrive_and_wait();
    }
    try {
      while (!mine.empty()) release(mine.size() - 1);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(failures_mutex);
      failures.push_back(e.what());
    }
    sync.arrive_and_wait();  // the final check: nothing held
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& th : threads) th.join();

  MESSAGE(allocations.load() << " allocations, " << frees.load() << " frees, " << recorded.load()
                             << " record_stream, " << ooms.load() << " OOMs, "
                             << a->stats().num_alloc_retries << " retries");
  for (size_t i = 0; i < failures.size() && i < 10; ++i) FAIL_CHECK("worker: " << failures[i]);
  CHECK(failures.empty());
  CHECK(phases_checked == kOpsPerThread / kPhaseOps + 1);
  for (size_t i = 0; i < errors.size() && i < 10; ++i) FAIL_CHECK(errors[i]);
  CHECK(errors.empty());
  CHECK(corrupted.load() == 0);
  CHECK(allocations.load() == frees.load());
  CHECK(loop_ops.load() == int64_t{kThreads} * kOpsPerThread);
  const MemoryStats s = a->stats();
  CHECK(s.num_ooms == ooms.load());
  CHECK(s.allocation[StatPool::All].allocated == allocations.load());
  CHECK(s.allocation[StatPool::All].current == 0);
  CHECK(s.allocated_bytes[StatPool::All].current == 0);
  CHECK(s.requested_bytes[StatPool::All].current == 0);

  a->empty_cache();  // also returns blocks still waiting for their events
  const MemoryStats e = a->stats();
  CHECK(e.reserved_bytes[StatPool::All].current == 0);
  CHECK(e.segment[StatPool::All].current == 0);
  CHECK(e.active_bytes[StatPool::All].current == 0);
  CHECK(e.inactive_split_bytes[StatPool::All].current == 0);
  CHECK(e.num_device_alloc == e.num_device_free);
  CHECK(a.source->live_bytes() == 0);
  CHECK(a->snapshot().segments.empty());
}

// snapshot() is "a picture at one moment": its statistics must describe its own segments even
// while another thread allocates and releases. (Racy by nature: the check looks at up to
// 20,000 snapshots and stops at the first that disagrees.)
TEST_CASE("a snapshot taken while another thread allocates agrees with its own statistics") {
  TestAllocator a;
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load()) {
      void* p = a->allocate(5 * kMiB);  // a 20 MiB segment, then released again
      a->free(p);
      a->empty_cache();
    }
  });
  int tries = 0, inconsistent = 0;
  for (; tries < 20000 && inconsistent == 0; ++tries) {
    const MemorySnapshot snap = a->snapshot();
    int64_t reserved = 0;
    for (const SegmentInfo& seg : snap.segments) reserved += static_cast<int64_t>(seg.total_size);
    if (snap.stats.segment[StatPool::All].current != static_cast<int64_t>(snap.segments.size()) ||
        snap.stats.reserved_bytes[StatPool::All].current != reserved)
      ++inconsistent;
  }
  stop = true;
  churn.join();
  INFO("after " << tries << " snapshots");
  CHECK(inconsistent == 0);
}
