// A picture of a caching allocator at one moment: every segment with its blocks, plus the
// recent allocation history when recording is on. memory_snapshot() returns it; the JSON
// export and the SVG memory map (memory_report.h) are drawn from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../core/stream.h"
#include "memory_stats.h"

namespace kiln {

/// What a block is doing.
enum class BlockState : uint8_t {
  Active,         ///< handed out to a user
  AwaitingFree,   ///< freed by the user, waiting for stream events (record_stream)
  Inactive,       ///< free and cached, ready for reuse
};

/// One block of a segment.
struct BlockInfo {
  uint64_t address = 0;
  uint64_t size = 0;            ///< bytes the block spans (a multiple of 512)
  uint64_t requested_size = 0;  ///< bytes the user asked for (0 when not Active)
  BlockState state = BlockState::Inactive;
};

/// A range of addresses.
struct AddressRange {
  uint64_t address = 0;
  uint64_t size = 0;
};

/// One segment obtained from the device, split into consecutive blocks. An expandable
/// segment is an address range whose blocks cover all of it, with physical pages mapped only
/// where `mapped_ranges` say.
struct SegmentInfo {
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;  ///< bytes of Active blocks
  uint64_t active_size = 0;     ///< bytes of Active and AwaitingFree blocks
  uint64_t requested_size = 0;  ///< requested bytes of Active blocks
  StreamId stream = 0;
  bool is_large = false;        ///< large pool (else small pool)
  uint64_t pool_id = 0;         ///< 0 for the default pools, else the private pool's id
  bool is_expandable = false;   ///< an expandable segment (total_size: its address range)
  uint64_t page_size = 0;       ///< expandable: bytes of one physical page
  uint64_t mapped_size = 0;     ///< bytes backed by memory: total_size, or for an expandable segment its mapped pages
  std::vector<AddressRange> mapped_ranges;  ///< expandable: the mapped runs of pages, in address order
  std::vector<BlockInfo> blocks;
};

/// What happened, in the allocation history.
enum class TraceAction : uint8_t {
  Alloc,          ///< a block was handed out
  FreeRequested,  ///< the user freed a block that still waits for stream events
  FreeCompleted,  ///< a block returned to the cache
  SegmentAlloc,   ///< a segment was obtained from the device
  SegmentFree,    ///< a segment was given back to the device
  Oom,            ///< an allocation failed (size = bytes asked for)
  SegmentMap,     ///< pages were mapped into an expandable segment
  SegmentUnmap,   ///< pages were unmapped from an expandable segment
};

/// One history entry.
struct TraceEntry {
  TraceAction action = TraceAction::Alloc;
  uint64_t address = 0;
  uint64_t size = 0;
  StreamId stream = 0;
  int64_t time_us = 0;  ///< microseconds on the steady clock
};

/// Segments, history and statistics of one device's allocator.
struct MemorySnapshot {
  std::string device;                 ///< "cpu" or "cuda:0"
  std::vector<SegmentInfo> segments;  ///< in address order
  std::vector<TraceEntry> history;    ///< oldest first (empty unless history is recorded)
  MemoryStats stats;
};

/// "active", "awaiting_free", "inactive".
const char* block_state_name(BlockState s);
/// "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom",
/// "segment_map", "segment_unmap".
const char* trace_action_name(TraceAction a);

}  // namespace kiln
