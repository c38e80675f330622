// CUDA segment source. cudaMalloc's out-of-memory error is an answer (nullptr: the caching
// allocator frees its cache and retries), every other failure is an Error.
#include "cuda_segment_source.h"

#include "../core/cuda_guard.h"

namespace kiln {

namespace {
using cuda::DeviceGuard;

cudaEvent_t as_event(EventId id) { return reinterpret_cast<cudaEvent_t>(static_cast<uintptr_t>(id)); }
}  // namespace

CudaSegmentSource::CudaSegmentSource(int device) : device_(device) {}

std::string CudaSegmentSource::device_name() const { return fmt::format("cuda:{}", device_); }

void* CudaSegmentSource::allocate(size_t bytes) {
  DeviceGuard guard(device_);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: out of memory is an answer here, not a failure
    return nullptr;
  }
  CUDA_CHECK(status);
  return p;
}

void CudaSegmentSource::release(void* ptr, size_t) {
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaFree(ptr));
}

std::pair<size_t, size_t> CudaSegmentSource::memory_info() {
  DeviceGuard guard(device_);
  size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return {free_bytes, total};
}

EventId CudaSegmentSource::record_event(StreamId stream) {
  DeviceGuard guard(device_);
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)));
  return static_cast<EventId>(reinterpret_cast<uintptr_t>(event));
}

bool CudaSegmentSource::event_completed(EventId event) {
  return cuda::ready(cudaEventQuery(as_event(event)), "cudaEventQuery");
}

void CudaSegmentSource::wait_event(EventId event) { CUDA_CHECK(cudaEventSynchronize(as_event(event))); }

void CudaSegmentSource::destroy_event(EventId event) { CUDA_CHECK(cudaEventDestroy(as_event(event))); }

}  // namespace kiln
