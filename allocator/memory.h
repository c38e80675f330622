// The memory API users call, per device, with PyTorch's names: memory_stats(),
// memory_summary(), memory_snapshot(), empty_cache(), the peak/accumulated resets, history
// recording and the SVG memory map. Each device has one caching allocator, created on first
// use: host segments for Device::cpu(), cudaMalloc segments for Device::cuda(i).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "../core/device.h"
#include "caching_allocator.h"
#include "memory_report.h"

namespace kiln {

/// The caching allocator of `device` (created on first use; `op` names the caller in the
/// error for a device that cannot have one, e.g. a GPU index out of range).
CachingAllocator& caching_allocator(Device device, const char* op = "caching_allocator");

/// The allocator's statistics under PyTorch's keys ("allocated_bytes.all.current", ...).
std::map<std::string, int64_t> memory_stats(Device device);
/// PyTorch's memory_summary() table for `device`, plus Kiln's fragmentation verdict.
std::string memory_summary(Device device, bool abbreviated = false);
/// Every segment and block of `device`'s allocator, with the history if it is recorded.
MemorySnapshot memory_snapshot(Device device);
/// Starts or stops recording `device`'s allocation history (the newest max_entries events).
void record_memory_history(Device device, bool enabled = true, size_t max_entries = 100000);
/// Writes `device`'s memory map (memory_map_svg of its snapshot) to `path`.
void write_memory_map(const std::string& path, Device device);

/// Releases every cached whole segment of `device` back to it.
void empty_cache(Device device);
/// empty_cache() for every device that has an allocator.
void empty_cache();
/// Sets the peaks of `device`'s statistics to their current values.
void reset_peak_memory_stats(Device device);
/// Zeroes the accumulated totals of `device`'s statistics.
void reset_accumulated_memory_stats(Device device);

/// Bytes allocated to tensors on `device` now.
int64_t memory_allocated(Device device);
/// The most bytes allocated at once since the last peak reset.
int64_t max_memory_allocated(Device device);
/// Bytes reserved from `device` by its allocator now.
int64_t memory_reserved(Device device);
/// The most bytes reserved at once since the last peak reset.
int64_t max_memory_reserved(Device device);

}  // namespace kiln
