// SegmentSource: where a caching allocator gets its segments and its stream events. One
// implementation per kind of device: host memory (HostSegmentSource, also the test double
// with a capacity and hand-completed events) and CUDA (CudaSegmentSource: cudaMalloc,
// cudaFree, cudaEvent*). The allocator core never calls a device API directly.
//
// A source may also offer virtual memory, for expandable segments: address ranges reserved
// with nothing behind them, and physical pages of a fixed granularity that are created once
// and mapped, unmapped and mapped again at any page-aligned address of a reserved range (the
// CUDA driver's cuMemAddressReserve / cuMemCreate / cuMemMap; mmap on the host). A page
// unmapped from one place can be mapped at another without going back to the device, which
// is how the allocator moves physical memory to where a segment grows. A source without
// virtual memory returns 0 from vmm_granularity() and never sees the other calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "memory_snapshot.h"

namespace kiln {

/// Identifies an event recorded by a SegmentSource.
using EventId = uint64_t;
/// Identifies a physical page of a SegmentSource's virtual memory (0: none).
using PageHandle = uint64_t;

/// The device side of a caching allocator.
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  /// "cpu" or "cuda:N", as in error messages and reports.
  virtual std::string device_name() const = 0;
  /// Obtains a segment of `bytes`; nullptr when the device has no memory for it.
  virtual void* allocate(size_t bytes) = 0;
  /// Gives back a segment obtained from allocate().
  virtual void release(void* ptr, size_t bytes) = 0;
  /// (free, total) bytes of the device.
  virtual std::pair<size_t, size_t> memory_info() = 0;
  /// Records an event on `stream` that completes when the work queued so far has run.
  virtual EventId record_event(StreamId stream) = 0;
  /// True once the event has completed.
  virtual bool event_completed(EventId event) = 0;
  /// Blocks until the event has completed.
  virtual void wait_event(EventId event) = 0;
  /// Frees an event (completed or waited for).
  virtual void destroy_event(EventId event) = 0;

  /// Bytes of one physical page (a power of two), or 0 when the source has no virtual memory.
  virtual size_t vmm_granularity() { return 0; }
  /// Reserves `bytes` (a multiple of the granularity) of address space, aligned to the
  /// granularity, with nothing mapped; nullptr when no address space is left.
  virtual void* reserve_address_range(size_t bytes);
  /// Gives back a range from reserve_address_range, every page of it unmapped.
  virtual void release_address_range(void* base, size_t bytes);
  /// Obtains one physical page; 0 when the device has no memory for it.
  virtual PageHandle create_page();
  /// Gives an unmapped page back to the device.
  virtual void release_page(PageHandle page);
  /// Maps `count` pages, in order, at `address` (granularity-aligned, unmapped, inside one
  /// reserved range), readable and writable by the device.
  virtual void map_pages(void* address, const PageHandle* pages, size_t count);
  /// Unmaps the `count` pages mapped at `address` (each is still a page: it can be mapped
  /// again elsewhere or released). The caller has waited for the work that used them.
  virtual void unmap_pages(void* address, size_t count);
};

}  // namespace kiln
