// Pinned segment source. cudaHostAlloc's out-of-memory error is an answer (nullptr: the
// caching allocator frees its cache and retries), every other failure is an Error. Pinned
// memory is allocated with cudaHostAllocDefault, as PyTorch does: with unified addressing
// every GPU reaches it by DMA.
#include "cuda_pinned_segment_source.h"

#include "../core/cuda_guard.h"
#include "pinned_host_allocator.h"

namespace kiln {

namespace {
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }
}  // namespace

CudaPinnedSegmentSource::~CudaPinnedSegmentSource() {
  for (auto& pool : free_events_)
    for (PooledEvent* e : pool) {
      (void)cudaEventDestroy(as_event(e->event));
      delete e;
    }
}

void* CudaPinnedSegmentSource::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: out of memory is an answer here, not a failure
    return nullptr;
  }
  CUDA_CHECK(status);
  return p;
}

void CudaPinnedSegmentSource::release(void* ptr, size_t) { CUDA_CHECK(cudaFreeHost(ptr)); }

std::pair<size_t, size_t> CudaPinnedSegmentSource::memory_info() { return host_.memory_info(); }

EventId CudaPinnedSegmentSource::record_event(StreamId key) {
  const Stream stream = PinnedHostAllocator::stream_of_key(key);
  const int device = stream.device().index();
  PooledEvent* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_events_.size() <= static_cast<size_t>(device)) free_events_.resize(static_cast<size_t>(device) + 1);
    auto& pool = free_events_[static_cast<size_t>(device)];
    if (!pool.empty()) {
      e = pool.back();
      pool.pop_back();
    }
  }
  // The legacy default stream (handle 0) is the current device's: record with the stream's
  // device current, where its event must live too.
  cuda::DeviceGuard guard(device);
  if (e == nullptr) {
    cudaEvent_t event = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    e = new PooledEvent{event, device};
  }
  const cudaError_t status = cudaEventRecord(as_event(e->event), reinterpret_cast<cudaStream_t>(stream.id()));
  if (status != cudaSuccess) {
    destroy_event(reinterpret_cast<EventId>(e));
    CUDA_CHECK(status);
  }
  return reinterpret_cast<EventId>(e);
}

bool CudaPinnedSegmentSource::event_completed(EventId event) {
  return cuda::ready(cudaEventQuery(as_event(reinterpret_cast<PooledEvent*>(event)->event)), "cudaEventQuery");
}

void CudaPinnedSegmentSource::wait_event(EventId event) {
  CUDA_CHECK(cudaEventSynchronize(as_event(reinterpret_cast<PooledEvent*>(event)->event)));
}

void CudaPinnedSegmentSource::destroy_event(EventId event) {
  auto* e = reinterpret_cast<PooledEvent*>(event);
  std::lock_guard<std::mutex> lock(mutex_);
  free_events_[static_cast<size_t>(e->device)].push_back(e);
}

}  // namespace kiln
