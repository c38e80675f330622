// SegmentSource: where a caching allocator gets its segments and its stream events. One
// implementation per kind of device: host memory (HostSegmentSource, also the test double
// with a capacity and hand-completed events) and CUDA (CudaSegmentSource: cudaMalloc,
// cudaFree, cudaEvent*). The allocator core never calls a device API directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "memory_snapshot.h"

namespace kiln {

/// Identifies an event recorded by a SegmentSource.
using EventId = uint64_t;

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
};

}  // namespace kiln
