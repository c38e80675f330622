// Device memory and events of one CUDA GPU as a segment source (CUDA builds only):
// segments from cudaMalloc, given back with cudaFree, stream events from cudaEventRecord;
// and, for expandable segments, the driver's virtual memory management: address ranges from
// cuMemAddressReserve, physical pages from cuMemCreate (pinned device memory of the minimum
// granularity, 2 MiB on current GPUs) mapped with cuMemMap and cuMemSetAccess, unmapped with
// cuMemUnmap, given back with cuMemRelease and cuMemAddressFree. A GPU (or driver) without
// virtual memory management reports a granularity of 0, and the allocator keeps classic
// segments.
//
// Events are pooled: with expandable segments the allocator records one on every free that
// empties a page, so destroy_event keeps the event for the next record_event instead of
// paying cudaEventCreate / cudaEventDestroy each time (re-recording an event is allowed even
// while its previous record is pending, and nobody waits for a destroyed one).
#pragma once

#include <mutex>
#include <vector>

#include "segment_source.h"

namespace kiln {

/// Segments of GPU `device` (every call runs with that device current).
class CudaSegmentSource : public SegmentSource {
 public:
  explicit CudaSegmentSource(int device);
  /// Destroys the pooled events.
  ~CudaSegmentSource() override;
  CudaSegmentSource(const CudaSegmentSource&) = delete;
  CudaSegmentSource& operator=(const CudaSegmentSource&) = delete;

  std::string device_name() const override;
  void* allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  std::pair<size_t, size_t> memory_info() override;
  EventId record_event(StreamId stream) override;
  bool event_completed(EventId event) override;
  void wait_event(EventId event) override;
  void destroy_event(EventId event) override;
  size_t vmm_granularity() override;
  void* reserve_address_range(size_t bytes) override;
  void release_address_range(void* base, size_t bytes) override;
  PageHandle create_page() override;
  void release_page(PageHandle page) override;
  void map_pages(void* address, const PageHandle* pages, size_t count) override;
  void unmap_pages(void* address, size_t count) override;

 private:
  int device_;
  bool vmm_queried_ = false;
  size_t granularity_ = 0;  // 0: no virtual memory management on this GPU
  std::mutex events_mutex_;
  std::vector<EventId> spare_events_;  // destroyed by the allocator, kept for reuse
};

}  // namespace kiln
