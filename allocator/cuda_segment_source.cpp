// CUDA segment source. Out of memory is an answer (nullptr or page 0 from cudaMalloc or
// cuMemCreate; out of address space from cuMemAddressReserve: the caching allocator frees its
// cache and retries), every other failure is an Error naming the call.
//
// The driver API functions come from the runtime (cudaGetDriverEntryPointByVersion), not from
// linking libcuda: a CUDA build of Kiln must still start on a machine without the NVIDIA
// driver (CI builds and tests the CUDA configuration there, where the CUDA suite skips).
#include "cuda_segment_source.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include "../core/cuda_guard.h"

namespace kiln {

namespace {
using cuda::DeviceGuard;

cudaEvent_t as_event(EventId id) { return reinterpret_cast<cudaEvent_t>(static_cast<uintptr_t>(id)); }

/// The driver functions the virtual memory calls use, as the CUDA 12.0 ABI defines them.
struct DriverApi {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  bool complete = false;  // every function was found
};

/// Looks `symbol` up in the driver; false when the driver does not have it.
template <typename Fn>
bool load(Fn& fn, const char* symbol) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t status = cudaGetDriverEntryPoint(symbol, &p, cudaEnableDefault, &found);
#endif
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  fn = reinterpret_cast<Fn>(p);
  return true;
}

/// The driver functions, looked up once.
const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a;
    a.complete = load(a.get_error_name, "cuGetErrorName") && load(a.get_error_string, "cuGetErrorString") &&
                 load(a.ctx_get_current, "cuCtxGetCurrent") && load(a.device_get, "cuDeviceGet") &&
                 load(a.device_get_attribute, "cuDeviceGetAttribute") &&
                 load(a.mem_get_allocation_granularity, "cuMemGetAllocationGranularity") &&
                 load(a.mem_address_reserve, "cuMemAddressReserve") && load(a.mem_address_free, "cuMemAddressFree") &&
                 load(a.mem_create, "cuMemCreate") && load(a.mem_release, "cuMemRelease") &&
                 load(a.mem_map, "cuMemMap") && load(a.mem_unmap, "cuMemUnmap") &&
                 load(a.mem_set_access, "cuMemSetAccess");
    return a;
  }();
  return api;
}

/// Throws an Error for a driver call that did not return CUDA_SUCCESS.
void check_driver(CUresult status, const char* call, const char* file, int line) {
  if (status == CUDA_SUCCESS) [[likely]]
    return;
  const char* name = nullptr;
  const char* text = nullptr;
  (void)driver().get_error_name(status, &name);
  (void)driver().get_error_string(status, &text);
  detail::throw_error(file, line,
                      fmt::format("CUDA driver error: {} returned {} ({}): {}", call, static_cast<int>(status),
                                  name != nullptr ? name : "unknown", text != nullptr ? text : "unknown error"));
}
/// Evaluates a driver call and throws an Error naming `name` unless it returns CUDA_SUCCESS.
#define CU_CHECK(name, call) check_driver((call), name, __FILE__, __LINE__)

/// Driver calls need a current context: the runtime's primary context of the device the
/// guard made current (a thread that has made no runtime call yet has none).
void ensure_context() {
  CUcontext context = nullptr;
  CU_CHECK("cuCtxGetCurrent", driver().ctx_get_current(&context));
  if (context == nullptr) CUDA_CHECK(cudaFree(nullptr));
}

/// Pinned memory on device `device`: what every page is made of.
CUmemAllocationProp page_properties(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUdeviceptr as_device_ptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
}  // namespace

CudaSegmentSource::CudaSegmentSource(int device) : device_(device) {}

CudaSegmentSource::~CudaSegmentSource() {
  // No device guard and no check: an event is destroyed from any device, and a source that
  // lives until process exit may outlive the CUDA runtime (which then frees the events).
  for (const EventId event : spare_events_) (void)cudaEventDestroy(as_event(event));
}

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

// Events are created (for device_) and recorded with device_ current: cudaEventRecord needs
// the event and the stream on the current device. Querying, waiting for and destroying an
// event work from any device, so those calls need no guard.
EventId CudaSegmentSource::record_event(StreamId stream) {
  DeviceGuard guard(device_);
  EventId id = 0;
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    if (!spare_events_.empty()) {
      id = spare_events_.back();
      spare_events_.pop_back();
    }
  }
  if (id == 0) {
    cudaEvent_t created = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&created, cudaEventDisableTiming));
    id = static_cast<EventId>(reinterpret_cast<uintptr_t>(created));
  }
  const cudaError_t status = cudaEventRecord(as_event(id), reinterpret_cast<cudaStream_t>(stream));
  if (status != cudaSuccess) destroy_event(id);  // back to the pool, then report the failure
  CUDA_CHECK(status);
  return id;
}

bool CudaSegmentSource::event_completed(EventId event) {
  return cuda::ready(cudaEventQuery(as_event(event)), "cudaEventQuery");
}

void CudaSegmentSource::wait_event(EventId event) { CUDA_CHECK(cudaEventSynchronize(as_event(event))); }

void CudaSegmentSource::destroy_event(EventId event) {
  std::lock_guard<std::mutex> lock(events_mutex_);
  spare_events_.push_back(event);
}

// ---- virtual memory management -------------------------------------------------------------

size_t CudaSegmentSource::vmm_granularity() {
  if (vmm_queried_) return granularity_;
  vmm_queried_ = true;
  if (!driver().complete) return granularity_;  // a driver without these functions: classic segments
  DeviceGuard guard(device_);
  ensure_context();
  const DriverApi& d = driver();
  CUdevice dev = 0;
  CU_CHECK("cuDeviceGet", d.device_get(&dev, device_));
  int supported = 0;
  CU_CHECK("cuDeviceGetAttribute",
           d.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  if (supported != 0) {
    const CUmemAllocationProp prop = page_properties(device_);
    size_t granularity = 0;
    CU_CHECK("cuMemGetAllocationGranularity",
             d.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    granularity_ = granularity;
  }
  return granularity_;
}

void* CudaSegmentSource::reserve_address_range(size_t bytes) {
  DeviceGuard guard(device_);
  ensure_context();
  CUdeviceptr base = 0;
  const CUresult status = driver().mem_address_reserve(&base, bytes, granularity_, 0, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;  // no address space left: an answer
  CU_CHECK("cuMemAddressReserve", status);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(base));
}

void CudaSegmentSource::release_address_range(void* base, size_t bytes) {
  DeviceGuard guard(device_);
  ensure_context();
  CU_CHECK("cuMemAddressFree", driver().mem_address_free(as_device_ptr(base), bytes));
}

PageHandle CudaSegmentSource::create_page() {
  DeviceGuard guard(device_);
  ensure_context();
  const CUmemAllocationProp prop = page_properties(device_);
  CUmemGenericAllocationHandle handle = 0;
  const CUresult status = driver().mem_create(&handle, granularity_, &prop, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) return 0;  // the device is full: an answer
  CU_CHECK("cuMemCreate", status);
  KILN_INTERNAL_ASSERT(handle != 0, "cuMemCreate returned handle 0");
  return static_cast<PageHandle>(handle);
}

void CudaSegmentSource::release_page(PageHandle page) {
  DeviceGuard guard(device_);
  ensure_context();
  CU_CHECK("cuMemRelease", driver().mem_release(static_cast<CUmemGenericAllocationHandle>(page)));
}

void CudaSegmentSource::map_pages(void* address, const PageHandle* pages, size_t count) {
  DeviceGuard guard(device_);
  ensure_context();
  const CUdeviceptr base = as_device_ptr(address);
  for (size_t k = 0; k < count; ++k)
    CU_CHECK("cuMemMap", driver().mem_map(base + k * granularity_, granularity_, 0,
                                          static_cast<CUmemGenericAllocationHandle>(pages[k]), 0));
  // One access call for the run: the device reads and writes it.
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_CHECK("cuMemSetAccess", driver().mem_set_access(base, count * granularity_, &access, 1));
}

void CudaSegmentSource::unmap_pages(void* address, size_t count) {
  DeviceGuard guard(device_);
  ensure_context();
  const CUdeviceptr base = as_device_ptr(address);
  for (size_t k = 0; k < count; ++k) CU_CHECK("cuMemUnmap", driver().mem_unmap(base + k * granularity_, granularity_));
}

}  // namespace kiln
