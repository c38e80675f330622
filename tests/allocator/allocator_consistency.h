// Shared by the randomized allocator tests (test_stress.cpp, test_expandable_property.cpp):
// blocks that carry a pattern of their own, and the consistency check of a quiescent
// allocator against its snapshot, its statistics and its host source, for classic and
// expandable segments alike.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "allocator/expandable_view.h"
#include "allocator_testing.h"

namespace kiln::testing {

/// A block a thread holds.
struct Live {
  void* ptr;
  size_t bytes;
  uint64_t tag;  // thread and allocation number: the seed of its pattern
  StreamId stream;
};

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Writes (or, with `write` false, counts mismatches of) the block's pattern: every 8-byte
/// word up to 64 KiB; one word per 512 bytes up to 1 MiB, which still covers every place
/// another block could start (blocks start at multiples of 512); one word per 4 KiB page
/// above (to keep the run short). The last bytes always.
inline size_t pattern(const Live& b, bool write) {
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
inline size_t draw_size(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double r = u(rng);
  if (r < 0.88) return static_cast<size_t>(std::exp(u(rng) * std::log(double(kMiB))));  // [1, 1 MiB]
  if (r < 0.98) return kMiB + 1 + static_cast<size_t>(u(rng) * double(9 * kMiB - 1));
  return 10 * kMiB + static_cast<size_t>(u(rng) * double(2 * kMiB));
}

/// Everything that must hold of a quiescent allocator whose live blocks are `live` (all
/// threads' blocks); each violation is one line of the result.
inline std::vector<std::string> consistency_errors(CachingAllocator& a, const HostSegmentSource& source,
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
  int64_t classic_segments = 0, mapped_pages = 0, expandable_segments = 0;
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
    // An expandable segment: its mapped ranges add up, lie on its pages, and hold every byte
    // of every block in use (by the source's own books); its non-releasable bytes are the
    // free bytes on pages that hold live bytes.
    int64_t nonrel_blocks = 0, nonrel_bytes = 0;
    if (seg.is_expandable) {
      ++expandable_segments;
      expect(seg.page_size > 0 && seg.address % seg.page_size == 0, "expandable segment not page-aligned");
      uint64_t mapped = 0, range_end = seg.address;
      for (const AddressRange& r : seg.mapped_ranges) {
        expect(r.address >= range_end && r.size > 0 && r.size % seg.page_size == 0 &&
                   (r.address - seg.address) % seg.page_size == 0 && r.address + r.size <= seg.address + seg.total_size,
               fmt::format("bad mapped range {:#x} + {}", r.address, r.size));
        expect(source.is_mapped(reinterpret_cast<const void*>(r.address), r.size),
               fmt::format("mapped range {:#x} + {} is not mapped in the source", r.address, r.size));
        range_end = r.address + r.size;
        mapped += r.size;
      }
      expect(mapped == seg.mapped_size, "mapped ranges do not add up to mapped_size");
      mapped_pages += static_cast<int64_t>(mapped / seg.page_size);
      for (const BlockInfo& b : seg.blocks)
        if (b.state != BlockState::Inactive)
          expect(source.is_mapped(reinterpret_cast<const void*>(b.address), b.size),
                 fmt::format("block {:#x} ({} bytes) in use is not all mapped", b.address, b.size));
      size_t last_block = SIZE_MAX;
      for (const Piece& piece : expandable_pieces(seg, expandable_shown_end(seg))) {
        if (piece.kind != PieceKind::FreeOnUsedPage) continue;
        nonrel_bytes += static_cast<int64_t>(piece.size);
        if (piece.block != last_block) ++nonrel_blocks;
        last_block = piece.block;
      }
    } else {
      ++classic_segments;
    }
    for (Sums* p : {&sums[0], &sums[seg.is_large ? 1 : 2]}) {
      p->segments += 1;
      p->reserved += static_cast<int64_t>(seg.is_expandable ? seg.mapped_size : seg.total_size);
      p->inactive_split += nonrel_blocks;
      p->inactive_split_bytes += nonrel_bytes;
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
        if (!seg.is_expandable && b.state == BlockState::Inactive && seg.blocks.size() > 1) {
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
  expect(s.num_device_alloc - s.num_device_free == classic_segments + mapped_pages,
         "device allocs - device frees != classic segments + mapped pages");
  expect(static_cast<int64_t>(source.mapped_pages()) == mapped_pages, "the source's mapped pages != the snapshot's");
  expect(static_cast<int64_t>(source.pages()) == mapped_pages, "the source holds pages that are not mapped");
  expect(static_cast<int64_t>(source.reservations()) == expandable_segments,
         "the source's address ranges != expandable segments");
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

}  // namespace kiln::testing
