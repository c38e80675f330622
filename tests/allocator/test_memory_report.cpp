// stats_to_map() must expose exactly PyTorch's memory_stats() keys, and the fragmentation
// verdict must read right at every level; the state and action names are part of the JSON
// format. All checked on hand-built statistics and snapshots.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "allocator/memory_report.h"

using namespace kiln;

namespace {

constexpr int64_t KiB = 1024, MiB = KiB * KiB, GiB = MiB * KiB;

/// A snapshot whose statistics hold `reserved` and `non_releasable` bytes (all pools, current).
MemorySnapshot reserved_snapshot(int64_t reserved, int64_t non_releasable) {
  MemorySnapshot snap;
  snap.device = "cuda:0";
  snap.stats.reserved_bytes[StatPool::All].current = reserved;
  snap.stats.inactive_split_bytes[StatPool::All].current = non_releasable;
  return snap;
}

BlockInfo block(uint64_t address, uint64_t size, BlockState state) {
  return BlockInfo{address, size, state == BlockState::Active ? size - 100 : 0, state};
}

}  // namespace

TEST_CASE("stats_to_map has every key of torch.cuda.memory_stats(), sorted, and Kiln's three page counters") {
  // torch.cuda.memory_stats() of PyTorch 2.11: 9 per-pool statistics x 3 pools x 4 fields,
  // the two oversize statistics x 4 fields and 6 scalars, sorted by key.
  const std::vector<std::string> expected = {
    "active.all.allocated", "active.all.current", "active.all.freed", "active.all.peak",
    "active.large_pool.allocated", "active.large_pool.current", "active.large_pool.freed",
    "active.large_pool.peak", "active.small_pool.allocated", "active.small_pool.current",
    "active.small_pool.freed", "active.small_pool.peak", "active_bytes.all.allocated",
    "active_bytes.all.current", "active_bytes.all.freed", "active_bytes.all.peak",
    "active_bytes.large_pool.allocated", "active_bytes.large_pool.current", "active_bytes.large_pool.freed",
    "active_bytes.large_pool.peak", "active_bytes.small_pool.allocated", "active_bytes.small_pool.current",
    "active_bytes.small_pool.freed", "active_bytes.small_pool.peak", "allocated_bytes.all.allocated",
    "allocated_bytes.all.current", "allocated_bytes.all.freed", "allocated_bytes.all.peak",
    "allocated_bytes.large_pool.allocated", "allocated_bytes.large_pool.current",
    "allocated_bytes.large_pool.freed", "allocated_bytes.large_pool.peak",
    "allocated_bytes.small_pool.allocated", "allocated_bytes.small_pool.current",
    "allocated_bytes.small_pool.freed", "allocated_bytes.small_pool.peak", "allocation.all.allocated",
    "allocation.all.current", "allocation.all.freed", "allocation.all.peak",
    "allocation.large_pool.allocated", "allocation.large_pool.current", "allocation.large_pool.freed",
    "allocation.large_pool.peak", "allocation.small_pool.allocated", "allocation.small_pool.current",
    "allocation.small_pool.freed", "allocation.small_pool.peak", "inactive_split.all.allocated",
    "inactive_split.all.current", "inactive_split.all.freed", "inactive_split.all.peak",
    "inactive_split.large_pool.allocated", "inactive_split.large_pool.current",
    "inactive_split.large_pool.freed", "inactive_split.large_pool.peak",
    "inactive_split.small_pool.allocated", "inactive_split.small_pool.current",
    "inactive_split.small_pool.freed", "inactive_split.small_pool.peak", "inactive_split_bytes.all.allocated",
    "inactive_split_bytes.all.current", "inactive_split_bytes.all.freed", "inactive_split_bytes.all.peak",
    "inactive_split_bytes.large_pool.allocated", "inactive_split_bytes.large_pool.current",
    "inactive_split_bytes.large_pool.freed", "inactive_split_bytes.large_pool.peak",
    "inactive_split_bytes.small_pool.allocated", "inactive_split_bytes.small_pool.current",
    "inactive_split_bytes.small_pool.freed", "inactive_split_bytes.small_pool.peak", "max_split_size",
    "num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms", "num_sync_all_streams",
    "oversize_allocations.allocated", "oversize_allocations.current", "oversize_allocations.freed",
    "oversize_allocations.peak", "oversize_segments.allocated", "oversize_segments.current",
    "oversize_segments.freed", "oversize_segments.peak", "requested_bytes.all.allocated",
    "requested_bytes.all.current", "requested_bytes.all.freed", "requested_bytes.all.peak",
    "requested_bytes.large_pool.allocated", "requested_bytes.large_pool.current",
    "requested_bytes.large_pool.freed", "requested_bytes.large_pool.peak",
    "requested_bytes.small_pool.allocated", "requested_bytes.small_pool.current",
    "requested_bytes.small_pool.freed", "requested_bytes.small_pool.peak", "reserved_bytes.all.allocated",
    "reserved_bytes.all.current", "reserved_bytes.all.freed", "reserved_bytes.all.peak",
    "reserved_bytes.large_pool.allocated", "reserved_bytes.large_pool.current",
    "reserved_bytes.large_pool.freed", "reserved_bytes.large_pool.peak",
    "reserved_bytes.small_pool.allocated", "reserved_bytes.small_pool.current",
    "reserved_bytes.small_pool.freed", "reserved_bytes.small_pool.peak", "segment.all.allocated",
    "segment.all.current", "segment.all.freed", "segment.all.peak", "segment.large_pool.allocated",
    "segment.large_pool.current", "segment.large_pool.freed", "segment.large_pool.peak",
    "segment.small_pool.allocated", "segment.small_pool.current", "segment.small_pool.freed",
    "segment.small_pool.peak",
  };
  REQUIRE(expected.size() == 122);
  const std::map<std::string, int64_t> m = stats_to_map(MemoryStats{});
  std::vector<std::string> keys;
  for (const auto& [k, v] : m)
    if (k != "num_map_calls" && k != "num_unmap_calls" && k != "num_unmap_waits") keys.push_back(k);
  CHECK(keys == expected);
  CHECK(m.size() == 125);  // PyTorch's 122 and Kiln's num_map_calls, num_unmap_calls, num_unmap_waits
  CHECK(m.count("num_map_calls") == 1);
  CHECK(m.count("num_unmap_calls") == 1);
  CHECK(m.count("num_unmap_waits") == 1);
}

TEST_CASE("stats_to_map puts every value under its key") {
  MemoryStats st;
  // Distinct values: 1000 * array + 100 * pool + field, so a swapped key shows up.
  StatArray* arrays[] = {&st.allocation,     &st.allocated_bytes, &st.segment,
                         &st.reserved_bytes, &st.active,          &st.active_bytes,
                         &st.inactive_split, &st.inactive_split_bytes, &st.requested_bytes};
  const char* names[] = {"allocation", "allocated_bytes", "segment", "reserved_bytes", "active",
                         "active_bytes", "inactive_split", "inactive_split_bytes", "requested_bytes"};
  const char* pools[] = {"all", "large_pool", "small_pool"};
  for (int a = 0; a < 9; ++a)
    for (int p = 0; p < 3; ++p) arrays[a]->pools[p] = Stat{1000 * a + 100 * p + 1, 1000 * a + 100 * p + 2,
                                                            1000 * a + 100 * p + 3, 1000 * a + 100 * p + 4};
  st.oversize_allocations = Stat{91, 92, 93, 94};
  st.oversize_segments = Stat{95, 96, 97, 98};
  st.num_alloc_retries = 11;
  st.num_ooms = 12;
  st.num_device_alloc = 13;
  st.num_device_free = 14;
  st.num_sync_all_streams = 15;
  st.num_map_calls = 16;
  st.num_unmap_calls = 17;
  st.num_unmap_waits = 18;
  st.max_split_size = -1;
  const auto m = stats_to_map(st);
  for (int a = 0; a < 9; ++a) {
    for (int p = 0; p < 3; ++p) {
      const std::string prefix = std::string(names[a]) + "." + pools[p] + ".";
      CAPTURE(prefix);
      CHECK(m.at(prefix + "current") == 1000 * a + 100 * p + 1);
      CHECK(m.at(prefix + "peak") == 1000 * a + 100 * p + 2);
      CHECK(m.at(prefix + "allocated") == 1000 * a + 100 * p + 3);
      CHECK(m.at(prefix + "freed") == 1000 * a + 100 * p + 4);
    }
  }
  CHECK(m.at("oversize_allocations.current") == 91);
  CHECK(m.at("oversize_allocations.peak") == 92);
  CHECK(m.at("oversize_allocations.allocated") == 93);
  CHECK(m.at("oversize_allocations.freed") == 94);
  CHECK(m.at("oversize_segments.current") == 95);
  CHECK(m.at("oversize_segments.peak") == 96);
  CHECK(m.at("oversize_segments.allocated") == 97);
  CHECK(m.at("oversize_segments.freed") == 98);
  CHECK(m.at("num_alloc_retries") == 11);
  CHECK(m.at("num_ooms") == 12);
  CHECK(m.at("num_device_alloc") == 13);
  CHECK(m.at("num_device_free") == 14);
  CHECK(m.at("num_sync_all_streams") == 15);
  CHECK(m.at("num_map_calls") == 16);
  CHECK(m.at("num_unmap_calls") == 17);
  CHECK(m.at("num_unmap_waits") == 18);
  CHECK(m.at("max_split_size") == -1);
}

TEST_CASE("fragmentation verdict: nothing reserved") {
  CHECK(fragmentation_verdict(MemorySnapshot{}) == "Fragmentation: none \u2014 nothing is reserved.");
  CHECK(fragmentation_verdict(reserved_snapshot(0, 0)) == "Fragmentation: none \u2014 nothing is reserved.");
}

TEST_CASE("fragmentation verdict: levels switch at 10% and 30% of reserved, exactly") {
  const std::string tail = " is non-releasable (free pieces of split segments); no free blocks are cached.";
  CHECK(fragmentation_verdict(reserved_snapshot(1000, 0)) ==
        "Fragmentation: low \u2014 0 B of 1000 B reserved (0.0%)" + tail);
  CHECK(fragmentation_verdict(reserved_snapshot(1000, 99)) ==
        "Fragmentation: low \u2014 99 B of 1000 B reserved (9.9%)" + tail);
  CHECK(fragmentation_verdict(reserved_snapshot(1000, 100)) ==
        "Fragmentation: moderate \u2014 100 B of 1000 B reserved (10.0%)" + tail);
  CHECK(fragmentation_verdict(reserved_snapshot(1000, 299)) ==
        "Fragmentation: moderate \u2014 299 B of 1000 B reserved (29.9%)" + tail);
  CHECK(fragmentation_verdict(reserved_snapshot(1000, 300)) ==
        "Fragmentation: high \u2014 300 B of 1000 B reserved (30.0%)" + tail);
  CHECK(fragmentation_verdict(reserved_snapshot(1000, 1000)) ==
        "Fragmentation: high \u2014 1000 B of 1000 B reserved (100.0%)" + tail);
  // One byte under a threshold of a reservation that does not divide by 10.
  CHECK(fragmentation_verdict(reserved_snapshot(40 * MiB + 1, 4 * MiB)).rfind("Fragmentation: low ", 0) == 0);
  CHECK(fragmentation_verdict(reserved_snapshot(40 * MiB + 1, 4 * MiB + 1)).rfind("Fragmentation: moderate ", 0) == 0);
  CHECK(fragmentation_verdict(reserved_snapshot(40 * MiB - 1, 4 * MiB)).rfind("Fragmentation: moderate ", 0) == 0);
  CHECK(fragmentation_verdict(reserved_snapshot(40 * MiB + 3, 12 * MiB)).rfind("Fragmentation: moderate ", 0) == 0);
  CHECK(fragmentation_verdict(reserved_snapshot(40 * MiB + 3, 12 * MiB + 1)).rfind("Fragmentation: high ", 0) == 0);
  // Near the largest reservations the exact comparison must not overflow.
  const int64_t huge = INT64_MAX - 5;
  CHECK(fragmentation_verdict(reserved_snapshot(huge, huge / 10)).rfind("Fragmentation: low ", 0) == 0);
  CHECK(fragmentation_verdict(reserved_snapshot(huge, huge / 10 + 1)).rfind("Fragmentation: moderate ", 0) == 0);
  CHECK(fragmentation_verdict(reserved_snapshot(huge, huge)).rfind("Fragmentation: high ", 0) == 0);
}

TEST_CASE("fragmentation verdict: sizes in B, KiB, MiB and GiB") {
  const std::string tail = " is non-releasable (free pieces of split segments); no free blocks are cached.";
  CHECK(fragmentation_verdict(reserved_snapshot(1536, 512)) ==
        "Fragmentation: high \u2014 512 B of 1.5 KiB reserved (33.3%)" + tail);
  CHECK(fragmentation_verdict(reserved_snapshot(3 * GiB, 100 * MiB)) ==
        "Fragmentation: low \u2014 100.0 MiB of 3.0 GiB reserved (3.3%)" + tail);
  // 1023.99 KiB rounds up to the next unit rather than printing "1024.0 KiB".
  CHECK(fragmentation_verdict(reserved_snapshot(MiB - 10, 0)) ==
        "Fragmentation: low \u2014 0 B of 1.0 MiB reserved (0.0%)" + tail);
}

TEST_CASE("fragmentation verdict: largest free block against all free blocks") {
  MemorySnapshot snap = reserved_snapshot(22 * MiB, 10 * MiB);
  SegmentInfo split;  // a 20 MiB large-pool segment split into four blocks
  split.address = 0x10000000;
  split.total_size = 20 * MiB;
  split.is_large = true;
  split.blocks = {block(0x10000000, 8 * MiB, BlockState::Active), block(0x10800000, 4 * MiB, BlockState::Inactive),
                  block(0x10c00000, 2 * MiB, BlockState::AwaitingFree),
                  block(0x10e00000, 6 * MiB, BlockState::Inactive)};
  SegmentInfo whole;  // a 2 MiB small-pool segment, entirely free
  whole.address = 0x20000000;
  whole.total_size = 2 * MiB;
  whole.blocks = {block(0x20000000, 2 * MiB, BlockState::Inactive)};
  snap.segments = {split, whole};
  CHECK(fragmentation_verdict(snap) ==
        "Fragmentation: high \u2014 10.0 MiB of 22.0 MiB reserved (45.5%) is non-releasable (free pieces of split "
        "segments); largest free block 6.0 MiB of 12.0 MiB free (50.0%).");

  // 8 of 40 MiB non-releasable (20%) is moderate; one free block is the largest and all.
  MemorySnapshot moderate = reserved_snapshot(40 * MiB, 8 * MiB);
  SegmentInfo seg = split;
  seg.blocks = {block(0x10000000, 12 * MiB, BlockState::Active), block(0x10c00000, 8 * MiB, BlockState::Inactive)};
  moderate.segments = {seg};
  CHECK(fragmentation_verdict(moderate) ==
        "Fragmentation: moderate \u2014 8.0 MiB of 40.0 MiB reserved (20.0%) is non-releasable (free pieces of split "
        "segments); largest free block 8.0 MiB of 8.0 MiB free (100.0%).");
}

TEST_CASE("state and action names") {
  CHECK(std::string(block_state_name(BlockState::Active)) == "active");
  CHECK(std::string(block_state_name(BlockState::AwaitingFree)) == "awaiting_free");
  CHECK(std::string(block_state_name(BlockState::Inactive)) == "inactive");
  CHECK(std::string(trace_action_name(TraceAction::Alloc)) == "alloc");
  CHECK(std::string(trace_action_name(TraceAction::FreeRequested)) == "free_requested");
  CHECK(std::string(trace_action_name(TraceAction::FreeCompleted)) == "free_completed");
  CHECK(std::string(trace_action_name(TraceAction::SegmentAlloc)) == "segment_alloc");
  CHECK(std::string(trace_action_name(TraceAction::SegmentFree)) == "segment_free");
  CHECK(std::string(trace_action_name(TraceAction::Oom)) == "oom");
  CHECK(std::string(trace_action_name(TraceAction::SegmentMap)) == "segment_map");
  CHECK(std::string(trace_action_name(TraceAction::SegmentUnmap)) == "segment_unmap");
}
