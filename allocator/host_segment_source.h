// Host memory as a segment source: page-aligned blocks from the C library, and virtual
// memory from mmap (PROT_NONE reservations; pages mapped with MAP_FIXED and given back by
// mapping PROT_NONE over them). It backs the CPU device's caching allocator, and, with a
// capacity and hand-completed events, it is the test double that lets the allocator's logic
// (splitting, streams, OOM, expandable segments) run on any machine. Its virtual memory and
// its events keep the books a GPU driver would enforce: a misuse by the allocator (mapping a
// page twice, unmapping what is not mapped, releasing a range with pages still mapped,
// querying or destroying an event already destroyed) is an InternalError, so the tests catch it.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

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
    /// Page size of the virtual memory (a power of two, a multiple of the host's 4 KiB
    /// pages); 2 MiB, as CUDA's, so that host replays predict the GPU's. 0: no virtual memory
    /// (expandable segments fall back to classic ones).
    size_t vmm_granularity = 2 << 20;
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
  size_t vmm_granularity() override { return options_.vmm_granularity; }
  void* reserve_address_range(size_t bytes) override;
  void release_address_range(void* base, size_t bytes) override;
  PageHandle create_page() override;
  void release_page(PageHandle page) override;
  void map_pages(void* address, const PageHandle* pages, size_t count) override;
  void unmap_pages(void* address, size_t count) override;

  /// Completes one pending event (manual_events mode).
  void complete_event(EventId event);
  /// Completes every pending event.
  void complete_all_events();
  /// Completes the pending events up to `last` (ids grow with each record_event): a GPU that
  /// has run the work queued until then.
  void complete_events_through(EventId last);
  /// The newest event recorded so far (0: none).
  EventId last_event() const;
  /// Events recorded and not yet completed.
  size_t pending_events() const;
  /// Events recorded and not yet destroyed, completed or not (an allocator gives back each).
  size_t live_events() const;
  /// wait_event calls so far (an allocator blocks on an event it needs before unmapping pages).
  size_t waited_events() const;
  /// Bytes currently handed out (segments and physical pages).
  size_t live_bytes() const;
  /// Physical pages created and not released, and those of them mapped now.
  size_t pages() const;
  size_t mapped_pages() const;
  /// Address ranges reserved now.
  size_t reservations() const;
  /// True when every byte of [address, address + bytes) lies in pages mapped now.
  bool is_mapped(const void* address, size_t bytes) const;

 private:
  Options options_;
  mutable std::mutex mutex_;
  size_t live_bytes_ = 0;
  EventId next_event_ = 1;
  size_t waited_events_ = 0;
  std::set<EventId> pending_;
  std::unordered_set<EventId> events_;  // recorded, not destroyed
  std::map<uintptr_t, size_t> reservations_;           // base -> bytes
  std::unordered_map<uintptr_t, PageHandle> mapped_;   // page address -> the page mapped there
  std::unordered_map<PageHandle, bool> pages_;         // page -> is it mapped
  PageHandle next_page_ = 1;
};

}  // namespace kiln
