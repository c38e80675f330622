// Reports drawn from an allocator's statistics and snapshot: PyTorch's memory_stats() keys,
// the memory_summary() table in PyTorch's layout plus Kiln's fragmentation verdict, the
// snapshot as JSON, and the SVG memory map. Pure functions of their inputs (no allocator
// state), so each is tested on hand-built stats and snapshots.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "memory_snapshot.h"

namespace kiln {

/// "512 B", "1.50 KiB", "20.00 MiB", "1.25 GiB": how sizes appear in messages and reports
/// (bytes below 1 KiB exactly, larger sizes with `decimals` decimals).
std::string format_bytes(uint64_t bytes, int decimals = 2);

/// The statistics under PyTorch's flat keys ("allocated_bytes.all.current", ...,
/// "num_alloc_retries", "max_split_size"), sorted by key as torch.cuda.memory_stats() is.
std::map<std::string, int64_t> stats_to_map(const MemoryStats& stats);

/// The memory_summary() text for a snapshot: PyTorch's 75-column boxed table (title
/// "Kiln CUDA memory summary, device ID 0" or "Kiln CPU memory summary"), then the
/// fragmentation verdict lines. `abbreviated` drops the per-pool rows, as in PyTorch.
std::string format_memory_summary(const MemorySnapshot& snapshot, bool abbreviated = false);

/// The line on expandable segments printed under the summary table (how many, pages and
/// bytes mapped, address space, pages mapped and unmapped so far, waits for the GPU before
/// unmapping); "" when there are none.
std::string expandable_summary(const MemorySnapshot& snapshot);
/// One line per private pool (CUDA graph capture): segments, reserved and allocated bytes;
/// empty when there is none.
std::string private_pools_summary(const MemorySnapshot& snapshot);

/// The one-line fragmentation verdict printed under the summary table.
std::string fragmentation_verdict(const MemorySnapshot& snapshot);

/// The snapshot as a JSON document (segments with blocks, history, statistics).
std::string snapshot_to_json(const MemorySnapshot& snapshot);

/// The snapshot drawn as a self-contained SVG: one bar per segment, blocks coloured by
/// state, sizes labelled, a legend and the fragmentation verdict.
std::string memory_map_svg(const MemorySnapshot& snapshot);

}  // namespace kiln
