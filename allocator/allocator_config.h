// Allocator settings, read from the environment as PyTorch reads PYTORCH_CUDA_ALLOC_CONF:
//   KILN_ALLOC_CONF="max_split_size_mb:N,garbage_collection_threshold:F"
//   KILN_NO_CACHING=1    every free goes straight back to the device (for debugging)
// A bad value is an error that names the variable, raised when the first allocator starts.
#pragma once

#include <cstddef>
#include <limits>
#include <string_view>

namespace kiln {

/// How a caching allocator behaves.
struct AllocatorConfig {
  /// Blocks of at least this many bytes are never split (and requests below it never take
  /// them), so large free blocks stay whole. Unlimited by default.
  size_t max_split_size = std::numeric_limits<size_t>::max();
  /// When > 0: before growing past this fraction of the device's memory, release cached
  /// segments, least recently used first. 0 disables it.
  double garbage_collection_threshold = 0.0;
  /// False: no caching; each allocation gets its own segment, released on free.
  bool caching = true;
  /// False: merge every freed block at once instead of deferring the merge of the latest
  /// one (same results either way; the tests compare the two). Not an environment option.
  bool defer_merges = true;
};

/// Parses KILN_ALLOC_CONF and KILN_NO_CACHING values (either may be empty); throws
/// kiln::Error naming the variable for an unknown option or a bad value.
AllocatorConfig parse_allocator_config(std::string_view alloc_conf, std::string_view no_caching);

/// The configuration from this process's environment (parsed once, on first use).
const AllocatorConfig& environment_allocator_config();

}  // namespace kiln
