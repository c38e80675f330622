// Allocator settings, read from the environment as PyTorch reads PYTORCH_CUDA_ALLOC_CONF:
//   KILN_ALLOC_CONF="max_split_size_mb:N,garbage_collection_threshold:F,expandable_segments:True,..."
//   KILN_NO_CACHING=1    every free goes straight back to the device (for debugging)
// Every option PyTorch's variable knows is accepted or refused by name: see
// parse_allocator_config. A bad value is an error that names the variable, raised when the
// first allocator starts.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <string_view>

namespace kiln {

/// How a caching allocator behaves.
struct AllocatorConfig {
  /// Power-of-two size intervals of roundup_power2_divisions: [1, 2) MiB (and below), [2, 4)
  /// MiB, ..., [32, 64) GiB and above, as PyTorch counts them.
  static constexpr size_t kRoundupIntervals = 16;

  /// Blocks of at least this many bytes are never split (and requests below it never take
  /// them), so large free blocks stay whole. Unlimited by default. No effect on expandable
  /// segments, whose free space merges and whose unused pages can always be unmapped.
  size_t max_split_size = std::numeric_limits<size_t>::max();
  /// A request of at least max_split_size takes a cached block at most this much larger
  /// (PyTorch's max_non_split_rounding_mb; 20 MiB by default).
  size_t max_non_split_rounding = 20 << 20;
  /// When > 0: before growing past this fraction of the device's memory, release cached
  /// segments, least recently used first. 0 disables it. (Expandable segments move every
  /// cached page to where they grow before they create one, so it has nothing to add there.)
  double garbage_collection_threshold = 0.0;
  /// False: no caching; each allocation gets its own segment, released on free (expandable
  /// segments are then not used).
  bool caching = true;
  /// False: merge every freed block at once instead of deferring the merge of the latest
  /// one (same results either way; the tests compare the two). Not an environment option.
  bool defer_merges = true;
  /// True: the default pools use expandable segments when the segment source has virtual
  /// memory (see CachingAllocator); sources without it keep classic segments.
  bool expandable_segments = false;
  /// With expandable_segments: the small pool's segments are expandable too (else classic
  /// 2 MiB segments). Not an environment option.
  bool expandable_small_pool = true;
  /// roundup_power2_divisions per interval (see kRoundupIntervals): a request in an interval
  /// with d > 1 divisions is rounded up to the next of d equal steps between its powers of
  /// two; 0 or 1 keeps the plain 512-byte rounding.
  std::array<size_t, kRoundupIntervals> roundup_power2_divisions{};
  /// Requests above this many bytes skip the power-of-two rounding (PyTorch 1.x's
  /// roundup_bypass_threshold_mb). Unlimited by default.
  size_t roundup_bypass_threshold = std::numeric_limits<size_t>::max();
};

/// Parses KILN_ALLOC_CONF and KILN_NO_CACHING values (either may be empty); throws
/// kiln::Error naming the variable for an unknown option, an option Kiln does not support
/// (saying what to use instead), or a bad value.
AllocatorConfig parse_allocator_config(std::string_view alloc_conf, std::string_view no_caching);

/// The configuration from this process's environment (parsed once, on first use).
const AllocatorConfig& environment_allocator_config();

}  // namespace kiln
