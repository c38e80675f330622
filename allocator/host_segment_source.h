// Host memory as a segment source: page-aligned blocks from the C library. It backs the
// CPU device's caching allocator, and, with a capacity and hand-completed events, it is the
// test double that lets the allocator's logic (splitting, streams, OOM) run on any machine.
#pragma once

#include <mutex>
#include <set>

#include "segment_source.h"

namespace kiln {

/// Segments from host memory.
class HostSegmentSource : public SegmentSource {
 public:
  struct Options {
    /// Bytes this source may hand out at once; beyond it allocate() returns nullptr, as an
    /// exhausted device would. 0: the host's physical memory.
    size_t capacity = 0;
    /// False: events complete at once (the CPU has no streams). True: events stay pending
    /// until complete_event() (or wait_event()), so tests can drive record_stream.
    bool manual_events = false;
  };

  HostSegmentSource() : HostSegmentSource(Options{}) {}
  explicit HostSegmentSource(Options options);
  ~HostSegmentSource() override;

  std::string device_name() const override { return "cpu"; }
  void* allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  std::pair<size_t, size_t> memory_info() override;
  EventId record_event(StreamId stream) override;
  bool event_completed(EventId event) override;
  void wait_event(EventId event) override;
  void destroy_event(EventId event) override;

  /// Completes one pending event (manual_events mode).
  void complete_event(EventId event);
  /// Completes every pending event.
  void complete_all_events();
  /// Events recorded and not yet completed.
  size_t pending_events() const;
  /// Bytes currently handed out.
  size_t live_bytes() const;

 private:
  Options options_;
  mutable std::mutex mutex_;
  size_t live_bytes_ = 0;
  EventId next_event_ = 1;
  std::set<EventId> pending_;
};

}  // namespace kiln
