// Device memory and events of one CUDA GPU as a segment source (CUDA builds only):
// segments from cudaMalloc, given back with cudaFree, stream events from cudaEventRecord.
#pragma once

#include "segment_source.h"

namespace kiln {

/// Segments of GPU `device` (every call runs with that device current).
class CudaSegmentSource : public SegmentSource {
 public:
  explicit CudaSegmentSource(int device);

  std::string device_name() const override;
  void* allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  std::pair<size_t, size_t> memory_info() override;
  EventId record_event(StreamId stream) override;
  bool event_completed(EventId event) override;
  void wait_event(EventId event) override;
  void destroy_event(EventId event) override;

 private:
  int device_;
};

}  // namespace kiln
