// Pinned host memory as a segment source (CUDA builds only): segments from cudaHostAlloc,
// given back with cudaFreeHost, and events recorded on the CUDA streams that used a block,
// each on its stream's device. Behind PinnedHostAllocator (pinned_host_allocator.h).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "host_segment_source.h"
#include "segment_source.h"

namespace kiln {

/// Page-locked host segments; events on the streams PinnedHostAllocator's keys stand for.
class CudaPinnedSegmentSource : public SegmentSource {
 public:
  CudaPinnedSegmentSource() = default;
  ~CudaPinnedSegmentSource() override;

  /// "cpu:pinned": host memory (memory_summary's host labels), the pinned pool of it.
  std::string device_name() const override { return "cpu:pinned"; }
  void* allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  /// The host's available and physical memory.
  std::pair<size_t, size_t> memory_info() override;
  /// Records an event on the stream that `stream` (a PinnedHostAllocator stream key) stands for.
  EventId record_event(StreamId stream) override;
  bool event_completed(EventId event) override;
  void wait_event(EventId event) override;
  /// Returns the event to a per-device pool: one staged copy per block, and an event per
  /// copy, would otherwise create and destroy a CUDA event every time.
  void destroy_event(EventId event) override;

 private:
  struct PooledEvent {
    void* event;  // cudaEvent_t
    int device;
  };

  HostSegmentSource host_;  // for memory_info: the host's figures
  std::mutex mutex_;        // guards free_events_
  std::vector<std::vector<PooledEvent*>> free_events_;  // per device
};

}  // namespace kiln
