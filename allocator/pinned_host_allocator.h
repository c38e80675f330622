// PinnedHostAllocator: a cache of page-locked (pinned) host memory, like PyTorch's
// CachingHostAllocator. pin_memory(), the pinned outputs of non_blocking device-to-host copies
// and the staging buffers of non_blocking host-to-device copies draw from it, instead of
// paying for cudaHostAlloc (which locks and maps every page) and cudaFreeHost (which waits
// for the whole device) on every call.
//
// It is Kiln's device-agnostic CachingAllocator over a pinned segment source (in CUDA builds
// CudaPinnedSegmentSource: cudaHostAlloc segments, events on CUDA streams), so caching,
// splitting, merging, the statistics, the summary and the snapshot are the device
// allocators' own. Host memory has no stream: every block is allocated on one pseudo stream
// (kHostStream, never a real stream's handle), and a copy that reads or writes a block on a
// CUDA stream marks the block used by that stream (record_stream). A block freed while a copy
// may still use it returns to the cache only once an event recorded on each such stream at
// the free has completed, so a copy never sees its buffer reused under it, and the host never
// waits for the GPU to free it.
//
// One pool serves every GPU: a (device, stream) pair becomes a small key, process-wide, that
// stands for it in the caching allocator's stream uses; the segment source maps a key back to
// its stream when it records the event (on that stream's device).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "../core/stream.h"
#include "caching_allocator.h"

namespace kiln {

/// Pinned host memory with stream-safe reuse; see the file comment.
class PinnedHostAllocator {
 public:
  /// The pseudo stream every block is allocated on.
  static constexpr StreamId kHostStream = ~StreamId{0};

  /// A cache over `source` (cudaHostAlloc segments; a host double in the CPU tests).
  explicit PinnedHostAllocator(std::unique_ptr<SegmentSource> source, AllocatorConfig config = {});
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;

  /// `bytes` of pinned memory (an empty DataPtr for 0 bytes), given back to the cache when the
  /// DataPtr dies; OutOfMemoryError starting with `op` when the host cannot pin that much.
  DataPtr allocate(size_t bytes, const char* op = "pin_memory");
  /// Marks the block that starts at `block` as used by `stream` (any CUDA device's): once
  /// freed, it is reused only after the work queued on `stream` by then has completed.
  void record_stream(void* block, const Stream& stream);
  /// The caching allocator underneath: statistics, snapshot, empty_cache, history.
  CachingAllocator& caching_allocator() { return allocator_; }
  /// The caching allocator underneath (read-only).
  const CachingAllocator& caching_allocator() const { return allocator_; }

  /// The key that stands for `stream` in the caching allocator (process-wide, from 1; the same
  /// stream always gets the same key).
  static StreamId stream_key(const Stream& stream);
  /// The stream that `key` (from stream_key) stands for; throws for a key never handed out.
  static Stream stream_of_key(StreamId key);

 private:
  static void free_block(void* context, void* data);  // a DataPtr's deleter

  CachingAllocator allocator_;
};

/// The process's pinned host allocator, created on first use; needs a CUDA build with a
/// visible GPU (else a kiln::Error that starts with `op` and says which is missing).
PinnedHostAllocator& pinned_host_allocator(const char* op = "pinned_host_allocator");

namespace cuda {

/// The pinned host cache's statistics under memory_stats()'s keys (zeros before first use).
std::map<std::string, int64_t> host_memory_stats();
/// memory_summary() for the pinned host cache (titled "Kiln pinned host memory summary").
std::string host_memory_summary(bool abbreviated = false);
/// Every segment and block of the pinned host cache (device "cpu:pinned").
MemorySnapshot host_memory_snapshot();
/// Gives every cached, wholly free pinned segment back (cudaFreeHost), after waiting for the
/// streams that still use freed blocks; blocks in use stay. Nothing to do before first use.
void host_empty_cache();
/// Sets the pinned host cache's peaks to their current values.
void reset_peak_host_memory_stats();
/// Zeroes the pinned host cache's accumulated totals.
void reset_accumulated_host_memory_stats();

}  // namespace cuda

}  // namespace kiln
