// Streams, events and device properties over the CUDA runtime; in a CPU-only build every
// entry point that needs a GPU says so.
#include "stream.h"

#include <array>
#include <utility>

#include "device_error.h"
#include "error.h"

#ifdef KILN_WITH_CUDA
#include "cuda_guard.h"
#endif

namespace kiln {

namespace {

constexpr int kMaxDevices = 64;

// Throws unless `device` is a CUDA device this machine has.
void check_cuda_device(Device device, const char* op) {
  KILN_CHECK(device.is_cuda(), "{}: expected a CUDA device, got {}", op, device.str());
  KILN_CHECK(cuda::is_built(), "{}: this build of Kiln has no CUDA support", op);
  const int count = cuda::device_count();
  KILN_CHECK(count > 0, "{}: no CUDA GPU is visible on this machine", op);
  KILN_CHECK(device.index() < count && device.index() < kMaxDevices,
             "{}: CUDA device {} is out of range: {} device(s) visible", op, device.index(), count);
}

#ifdef KILN_WITH_CUDA
thread_local std::array<StreamId, kMaxDevices> t_current_streams{};

cudaStream_t as_stream(StreamId id) { return reinterpret_cast<cudaStream_t>(id); }

using DeviceScope = cuda::DeviceGuard;
#endif

}  // namespace

#ifdef KILN_WITH_CUDA

Stream Stream::create(Device device) {
  check_cuda_device(device, "Stream::create");
  DeviceScope scope(device.index());
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(device, reinterpret_cast<StreamId>(s));
}

void Stream::synchronize() const {
  DeviceScope scope(device_.index());
  CUDA_CHECK(cudaStreamSynchronize(as_stream(id_)));
  cuda::check_device_error(device_.index());  // Note [Device-side errors]
}

bool Stream::query() const {
  DeviceScope scope(device_.index());
  return cuda::ready(cudaStreamQuery(as_stream(id_)), "cudaStreamQuery");
}

Event::Event(Device device, bool timing) : device_(device) {
  check_cuda_device(device, "Event");
  DeviceScope scope(device.index());
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  event_ = e;
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Event::Event(Event&& other) noexcept : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    device_ = other.device_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  KILN_CHECK(stream.device() == device_, "Event::record: the event is on {} but the stream on {}", device_.str(),
             stream.device().str());
  DeviceScope scope(device_.index());
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), as_stream(stream.id())));
}

void Event::block(const Stream& stream) const {
  DeviceScope scope(stream.device().index());
  CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream.id()), static_cast<cudaEvent_t>(event_), 0));
}

void Event::synchronize() const {
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  cuda::check_device_error(device_.index());
}

bool Event::query() const {
  return cuda::ready(cudaEventQuery(static_cast<cudaEvent_t>(event_)), "cudaEventQuery");
}

float Event::elapsed_ms(const Event& later) const {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_), static_cast<cudaEvent_t>(later.event_)));
  return ms;
}

namespace cuda {

Stream current_stream(Device device) {
  check_cuda_device(device, "current_stream");
  return Stream(device, t_current_streams[static_cast<size_t>(device.index())]);
}

void set_current_stream(const Stream& stream) {
  check_cuda_device(stream.device(), "set_current_stream");
  t_current_streams[static_cast<size_t>(stream.device().index())] = stream.id();
}

void synchronize(Device device) {
  check_cuda_device(device, "synchronize");
  DeviceScope scope(device.index());
  CUDA_CHECK(cudaDeviceSynchronize());
  check_device_error(device.index());
}

DeviceProperties device_properties(Device device) {
  check_cuda_device(device, "device_properties");
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device.index()));
  DeviceProperties out;
  out.name = p.name;
  out.major = p.major;
  out.minor = p.minor;
  out.multiprocessors = p.multiProcessorCount;
  out.total_memory = p.totalGlobalMem;
  out.l2_cache_bytes = static_cast<size_t>(p.l2CacheSize);
  out.shared_memory_per_block = p.sharedMemPerBlockOptin;
  out.memory_bus_width = p.memoryBusWidth;
  // CUDA 13's cudaDeviceProp has no clock fields; the attributes still report them.
  CUDA_CHECK(cudaDeviceGetAttribute(&out.max_clock_khz, cudaDevAttrClockRate, device.index()));
  CUDA_CHECK(cudaDeviceGetAttribute(&out.memory_clock_khz, cudaDevAttrMemoryClockRate, device.index()));
  return out;
}

}  // namespace cuda

#else  // CPU-only build: every GPU entry point reports that it needs CUDA.

Stream Stream::create(Device device) {
  check_cuda_device(device, "Stream::create");
  return Stream(device, 0);
}
void Stream::synchronize() const { check_cuda_device(device_, "Stream::synchronize"); }
bool Stream::query() const {
  check_cuda_device(device_, "Stream::query");
  return true;
}
Event::Event(Device device, bool) : device_(device) { check_cuda_device(device, "Event"); }
Event::~Event() = default;
Event::Event(Event&& other) noexcept : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
  device_ = other.device_;
  event_ = std::exchange(other.event_, nullptr);
  return *this;
}
void Event::record(const Stream&) { check_cuda_device(device_, "Event::record"); }
void Event::block(const Stream&) const { check_cuda_device(device_, "Event::block"); }
void Event::synchronize() const { check_cuda_device(device_, "Event::synchronize"); }
bool Event::query() const {
  check_cuda_device(device_, "Event::query");
  return true;
}
float Event::elapsed_ms(const Event&) const {
  check_cuda_device(device_, "Event::elapsed_ms");
  return 0.0f;
}

namespace cuda {
Stream current_stream(Device device) {
  check_cuda_device(device, "current_stream");
  return Stream(device, 0);
}
void set_current_stream(const Stream& stream) { check_cuda_device(stream.device(), "set_current_stream"); }
void synchronize(Device device) { check_cuda_device(device, "synchronize"); }
DeviceProperties device_properties(Device device) {
  check_cuda_device(device, "device_properties");
  return {};
}
}  // namespace cuda

#endif

namespace cuda {
StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}
StreamGuard::~StreamGuard() {
  try {
    set_current_stream(previous_);
  } catch (...) {
    // The stream was valid when the guard was made; nothing can fail here in practice.
  }
}
}  // namespace cuda

}  // namespace kiln
