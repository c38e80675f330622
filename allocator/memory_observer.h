// The allocation hook: while installed, a function sees every block a device's caching
// allocator hands out or takes back, with the device and the block's size. The profiler
// installs one for its memory columns (profile_memory); allocator/ knows nothing of it.
// With none installed, an allocation or free pays one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>

#include "../core/device.h"

namespace kiln {

/// Called with +bytes when a block is allocated and -bytes when it is freed (bytes: the
/// block's size, a multiple of 512), under the allocator's lock: it must be quick and must
/// not allocate through a caching allocator.
using MemoryObserver = void (*)(Device device, int64_t bytes);

/// Installs `observer` for every device's allocator (nullptr removes it).
void set_memory_observer(MemoryObserver observer);

namespace detail {
extern std::atomic<MemoryObserver> g_memory_observer;
}

}  // namespace kiln
