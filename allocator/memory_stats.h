// The statistics a caching allocator keeps, with PyTorch's meaning for every counter, so
// memory_stats() and memory_summary() read exactly like torch.cuda's.
//
// Definitions (as PyTorch's CUDACachingAllocator):
//   allocation / allocated_bytes   blocks handed out to users (sizes rounded to 512 B)
//   segment / reserved_bytes       segments obtained from the device (cudaMalloc / host)
//   active / active_bytes          blocks allocated or freed but awaiting stream events
//   inactive_split / _bytes        free blocks that are part of a split segment: cached
//                                  memory that cannot be released ("non-releasable")
//   requested_bytes                the sizes users asked for, before rounding
//   oversize_allocations/segments  allocations / segments of at least max_split_size
// With expandable segments (Kiln's meaning where PyTorch has none):
//   segment                        an expandable segment is one segment (its address range)
//   reserved_bytes                 the bytes of the physical pages mapped now
//   inactive_split / _bytes        free bytes on mapped pages that also hold live bytes: the
//                                  cached memory that cannot be unmapped (PyTorch counts none)
//   num_device_alloc / _free       physical pages created / released (cuMemCreate / cuMemRelease)
//   num_map_calls / num_unmap_calls pages mapped / unmapped (cuMemMap / cuMemUnmap calls)
//   num_unmap_waits                times the host waited for the GPU before unmapping pages (a
//                                  free page's event still pending: out of memory, empty_cache,
//                                  garbage collection); moving pages in the steady state never waits
// Each is a Stat {current, peak, allocated (total increase), freed (total decrease)}, kept
// for all pools, the large pool and the small pool.
#pragma once

#include <array>
#include <cstdint>

namespace kiln {

/// One counter: its value now, its highest value, and the totals added and removed.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;

  /// current += amount (amount >= 0), tracking peak and the running total.
  void increase(int64_t amount) {
    current += amount;
    peak = current > peak ? current : peak;
    allocated += amount;
  }
  /// current -= amount (amount >= 0), tracking the running total.
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
  /// peak = current.
  void reset_peak() { peak = current; }
  /// allocated = freed = 0.
  void reset_accumulated() { allocated = freed = 0; }
};

/// Index into a StatArray: every pool together, the large pool, the small pool.
enum class StatPool : int { All = 0, Large = 1, Small = 2 };

/// A Stat per StatPool.
struct StatArray {
  std::array<Stat, 3> pools;
  Stat& operator[](StatPool p) { return pools[static_cast<int>(p)]; }
  const Stat& operator[](StatPool p) const { return pools[static_cast<int>(p)]; }
  /// Applies `amount` to the All entry and to the entry of `pool` (Large or Small).
  void increase(StatPool pool, int64_t amount) {
    (*this)[StatPool::All].increase(amount);
    (*this)[pool].increase(amount);
  }
  void decrease(StatPool pool, int64_t amount) {
    (*this)[StatPool::All].decrease(amount);
    (*this)[pool].decrease(amount);
  }
};

/// Everything memory_stats() reports for one device.
struct MemoryStats {
  StatArray allocation;
  StatArray allocated_bytes;
  StatArray segment;
  StatArray reserved_bytes;
  StatArray active;
  StatArray active_bytes;
  StatArray inactive_split;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;
  Stat oversize_allocations;
  Stat oversize_segments;
  int64_t num_alloc_retries = 0;  ///< allocations that had to free cached memory and retry
  int64_t num_ooms = 0;           ///< allocations that failed with OutOfMemoryError
  int64_t num_device_alloc = 0;   ///< segments obtained from the device (cudaMalloc calls)
  int64_t num_device_free = 0;    ///< segments given back to the device (cudaFree calls)
  int64_t num_map_calls = 0;      ///< pages mapped into expandable segments (Kiln's key)
  int64_t num_unmap_calls = 0;    ///< pages unmapped from expandable segments (Kiln's key)
  int64_t num_unmap_waits = 0;    ///< host waits for the GPU before unmapping pages (Kiln's key)
  int64_t num_sync_all_streams = 0;
  int64_t max_split_size = 0;     ///< the configured max_split_size in bytes (SIZE_MAX: unset)
};

}  // namespace kiln
