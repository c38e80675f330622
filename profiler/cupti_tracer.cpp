// The device tracer on CUPTI (CUDA builds). The activity API records kernels as
// CONCURRENT_KERNEL activity (the KERNEL kind would serialize them), with MEMCPY and MEMSET
// records. Each record is tied to the op or scope that issued it without a callback on every
// kernel launch:
// - CUPTI's latency timestamps stamp each kernel record with the host time its launch was
//   queued, inside the launching call;
// - CUPTI's activity buffers are per thread, and CUPTI asks for a thread's buffer on that
//   thread, so the buffer a record arrives in names the launching thread;
// - the profiler then takes the innermost event of that thread open at that time
//   (launch_attribution.h).
// Memcpy and memset records carry no queued time, and a graph's kernels share one launch: a
// CUPTI callback on just those runtime calls (rare, and costly themselves) notes, at the
// call's entry, its correlation id with the thread's innermost open event
// (Collector::current_handle) and the host time. Work issued through the driver API directly
// is tied by its thread and queued time too; a record with neither has no launcher (its row
// has no parent op).
//
// bench/cupti_launch_cost checks both on the GPU (docs/BENCHMARKS.md, section 5), and what
// each CUPTI set-up costs a launch: a callback on every launch cost more than the latency
// timestamps, and CUPTI's external correlation ids arrive only in front of API activity
// records, which cost as much as the callback.
//
// Times: CUPTI converts device timestamps to host time itself, through the timestamp
// callback registered here (CLOCK_MONOTONIC, the clock of std::chrono::steady_clock), so
// kernels and ops share one clock; the offset to CUPTI's clock is still measured at start
// in case the callback could not be installed.
//
// Buffers: CUPTI asks for 4 MiB buffers (one per launching thread at a time) and hands them
// back full (from its own thread) or at stop(), when the current device is synchronized and
// every buffer is flushed. Records CUPTI had to drop are counted per buffer and reported,
// never silently lost.
//
// CUPTI's hooks keep costing every launch after its activity is disabled (+0.75 us per op on
// the H200, against +0.35 us after a finalize), so stop() also calls cuptiFinalize(); the
// next start() sets CUPTI up again, which costs that start about 10 ms (a schedule's warm-up
// steps absorb it: the recording runs on from warm-up into the active steps).
#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "../core/device.h"
#include "collector.h"
#include "device_tracer.h"

namespace kiln::profiler {

namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;
constexpr size_t kBufferAlign = 8;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
// The runtime calls whose work has no queued time (memcpys, memsets) or is many kernels
// (graph launches): their callbacks tie the work to its launcher.
constexpr CUpti_CallbackId kRuntimeCallbacks[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,     CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,           CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,       CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,           CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
};

// One launching API call seen by the callback: its correlation id, the event open on its
// thread, its host time.
struct Launch {
  uint32_t correlation = 0;
  int64_t handle = -1;
  int64_t time_ns = 0;  // CLOCK_MONOTONIC
};

struct TracerState {
  std::mutex mutex;
  bool registered = false;  // buffer and timestamp callbacks (again after each cuptiFinalize)
  bool running = false;
  int64_t origin_ns = 0;             // the profiler's time zero (CLOCK_MONOTONIC ns)
  std::vector<ProfileEvent> events;  // raw CUPTI times, kernel names still mangled
  uint64_t dropped = 0;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<uint64_t> event_threads;  // per event: the launching thread (0: unknown)
  int64_t offset_ns = 0;                // CUPTI's clock minus CLOCK_MONOTONIC
  // The launches the callback saw, appended by the launching threads (under their own mutex:
  // the activity buffers are parsed under the other one, on CUPTI's thread).
  std::mutex launch_mutex;
  std::vector<Launch> launches;
  // The thread each buffer in CUPTI's hands was requested on (under its own mutex: CUPTI may
  // ask for a buffer inside any CUDA call, including those start() makes under the other).
  std::mutex buffer_mutex;
  std::unordered_map<const uint8_t*, uint64_t> buffer_threads;
};

TracerState& state() {
  static TracerState* s = new TracerState();  // immortal: CUPTI may call back during exit
  return *s;
}

std::string cupti_error(const char* call, CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  return fmt::format("{} failed: {} (CUPTI error {}){}", call, text, static_cast<int>(result),
                     result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                         ? "; another CUDA tool (Nsight, compute-sanitizer, cuda-gdb) holds CUPTI"
                         : "");
}

uint64_t CUPTIAPI monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const char* memcpy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "other";
  }
}

const char* memory_kind(int kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed";
    default:
      return "Unknown";
  }
}

ProfileEvent device_event(EventKind kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                          uint32_t correlation) {
  ProfileEvent e;
  e.kind = kind;
  e.start_ns = static_cast<int64_t>(start);
  e.end_ns = static_cast<int64_t>(end);
  e.device = static_cast<int>(device);
  e.thread = stream;
  e.correlation = correlation;
  return e;
}

// A kernel, memcpy or memset record as a ProfileEvent (times still on CUPTI's clock, kernel
// names still mangled); nullopt for the other kinds.
std::optional<ProfileEvent> event_of(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      ProfileEvent e = device_event(EventKind::Kernel, k->start, k->end, k->deviceId, k->streamId, k->correlationId);
      e.name = k->name != nullptr ? k->name : "<unnamed kernel>";
      e.grid = {k->gridX, k->gridY, k->gridZ};
      e.block = {k->blockX, k->blockY, k->blockZ};
      e.registers_per_thread = k->registersPerThread;
      e.shared_memory_bytes = static_cast<int64_t>(k->staticSharedMemory) + k->dynamicSharedMemory;
      if (k->queued != CUPTI_TIMESTAMP_UNKNOWN) e.launch_ns = static_cast<int64_t>(k->queued);  // CUPTI's clock
      return e;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      ProfileEvent e = device_event(EventKind::Memcpy, m->start, m->end, m->deviceId, m->streamId, m->correlationId);
      e.detail = memcpy_kind(m->copyKind);
      e.name = fmt::format("Memcpy {} ({} -> {})", e.detail, memory_kind(m->srcKind), memory_kind(m->dstKind));
      e.transfer_bytes = static_cast<int64_t>(m->bytes);
      return e;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      ProfileEvent e = device_event(EventKind::Memset, m->start, m->end, m->deviceId, m->streamId, m->correlationId);
      e.name = fmt::format("Memset ({})", memory_kind(m->memoryKind));
      e.transfer_bytes = static_cast<int64_t>(m->bytes);
      return e;
    }
    default:
      return std::nullopt;
  }
}

// Called on the thread whose records the buffer will hold (per-thread buffers).
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // 0: CUPTI drops records and counts them
  *max_records = 0;                               // as many as fit
  if (*buffer == nullptr) return;
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.buffer_mutex);
  s.buffer_threads[*buffer] = Collector::thread_id();
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_size) {
  TracerState& s = state();
  uint64_t thread = 0;
  {
    std::lock_guard<std::mutex> lock(s.buffer_mutex);
    if (const auto it = s.buffer_threads.find(buffer); it != s.buffer_threads.end()) {
      thread = it->second;
      s.buffer_threads.erase(it);
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      if (!s.running) continue;
      if (std::optional<ProfileEvent> e = event_of(record)) {
        s.events.push_back(std::move(*e));
        s.event_threads.push_back(thread);  // the buffer's thread launched it
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  }
  std::free(buffer);
}

// Kernel names as PyTorch shows them: demangled when they are C++ symbols (cuBLAS's
// "sm90_xmma_gemm_..." are not, and stay as they are).
std::string demangle(const std::string& name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && out != nullptr ? std::string(out) : name;
  std::free(out);
  return result;
}

// At the entry of a memcpy, memset or graph launch: who issued it, and when.
void CUPTIAPI on_launch(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite != CUPTI_API_ENTER) return;
  const int64_t handle = Collector::current_handle();
  if (handle < 0) return;  // outside every event: no launcher to name
  const auto now = static_cast<int64_t>(monotonic_ns());
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  s.launches.push_back(Launch{call->correlationId, handle, now});
}

// Undoes start() (mutex held): activity off, callbacks off.
void stop_cupti(TracerState& s) {
  for (CUpti_ActivityKind kind : kKinds) (void)cuptiActivityDisable(kind);
  (void)cuptiActivityEnableLatencyTimestamps(0);
  if (s.subscriber != nullptr) {
    (void)cuptiUnsubscribe(s.subscriber);
    s.subscriber = nullptr;
  }
}

std::string start_cupti(TracerState& s) {
  if (!s.registered) {
    // Before any kind is enabled, so every record is on the monotonic clock; should it
    // fail, the offset measured in start() still aligns CUPTI's own clock.
    (void)cuptiActivityRegisterTimestampCallback(monotonic_ns);
    // Per-thread buffers (CUPTI's default, relied on: a buffer names its records' thread),
    // set before the buffer callbacks as CUPTI requires.
    uint8_t per_thread = 1;
    size_t per_thread_size = sizeof(per_thread);
    if (CUptiResult r =
            cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &per_thread_size, &per_thread);
        r != CUPTI_SUCCESS)
      return cupti_error("cuptiActivitySetAttribute(PER_THREAD_ACTIVITY_BUFFER)", r);
    if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
      return cupti_error("cuptiActivityRegisterCallbacks", r);
    s.registered = true;
  }
  if (CUptiResult r = cuptiSubscribe(&s.subscriber, on_launch, nullptr); r != CUPTI_SUCCESS) {
    s.subscriber = nullptr;
    return cupti_error("cuptiSubscribe", r);
  }
  for (CUpti_CallbackId api : kRuntimeCallbacks)
    if (CUptiResult r = cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, api); r != CUPTI_SUCCESS)
      return cupti_error("cuptiEnableCallback", r);
  // Kernel records get the host time their launch was queued: with their thread, the launcher.
  if (CUptiResult r = cuptiActivityEnableLatencyTimestamps(1); r != CUPTI_SUCCESS)
    return cupti_error("cuptiActivityEnableLatencyTimestamps", r);
  for (CUpti_ActivityKind kind : kKinds)
    if (CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) return cupti_error("cuptiActivityEnable", r);
  return "";
}

// Waits for the current device and has CUPTI hand back every buffer; false when nothing
// records. Every launched kernel must have finished before its record can be flushed.
// Errors are the user's to see on their next CUDA call; the profiler reads what completed.
bool flush_completed(TracerState& s) {
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.running) return false;
  }
  (void)cudaDeviceSynchronize();
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return true;
}

}  // namespace

std::string DeviceTracer::start(std::chrono::steady_clock::time_point origin) {
  if (!cuda::is_available()) return "no CUDA device is visible (CPU columns only)";
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.running) return "the device tracer is already recording";
  if (std::string error = start_cupti(s); !error.empty()) {
    stop_cupti(s);
    return error + " (CPU columns only)";
  }
  uint64_t cupti_now = 0;
  const uint64_t mono_now = monotonic_ns();
  s.offset_ns = cuptiGetTimestamp(&cupti_now) == CUPTI_SUCCESS
                    ? static_cast<int64_t>(cupti_now) - static_cast<int64_t>(mono_now)
                    : 0;
  s.origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(origin.time_since_epoch()).count();
  s.events.clear();
  s.event_threads.clear();
  s.dropped = 0;
  {
    std::lock_guard<std::mutex> launch_lock(s.launch_mutex);
    s.launches.clear();
  }
  s.running = true;
  return "";
}

DeviceRecords DeviceTracer::stop() {
  TracerState& s = state();
  if (!flush_completed(s)) return {};

  std::vector<ProfileEvent> events;  // in CUPTI's order, on CUPTI's clock
  std::vector<uint64_t> threads;     // per event: its launching thread
  DeviceRecords out;
  std::vector<Launch> launches;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    stop_cupti(s);
    s.running = false;
    events = std::move(s.events);
    threads = std::move(s.event_threads);
    out.dropped = s.dropped;
    s.events.clear();
    s.event_threads.clear();
    std::lock_guard<std::mutex> launch_lock(s.launch_mutex);
    launches = std::move(s.launches);
    s.launches.clear();
  }
  // Unhooks CUPTI from every launch (see the file comment; outside the mutex, as it may
  // hand back buffers); the callbacks are set up again by the next start().
  if (cuptiFinalize() == CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.registered = false;
  }

  std::unordered_map<uint32_t, const Launch*> launch_of;
  launch_of.reserve(launches.size());
  for (const Launch& l : launches) launch_of[l.correlation] = &l;
  std::unordered_map<std::string, std::string> demangled;
  const int64_t device_origin = s.origin_ns + s.offset_ns;  // time zero on CUPTI's clock
  for (ProfileEvent& e : events) {
    e.start_ns -= device_origin;
    e.end_ns -= device_origin;
    if (e.launch_ns >= 0) e.launch_ns -= device_origin;
    if (e.kind == EventKind::Kernel) {
      auto [it, added] = demangled.try_emplace(e.name);
      if (added) it->second = demangle(e.name);
      e.name = it->second;
    }
  }
  // In start order, each event with its launching thread and the callback's launcher.
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events[a].start_ns < events[b].start_ns; });
  out.events.reserve(order.size());
  out.launch_threads.reserve(order.size());
  out.launcher_handles.reserve(order.size());
  for (size_t i : order) {
    ProfileEvent& e = out.events.emplace_back(std::move(events[i]));
    out.launch_threads.push_back(threads[i]);
    const auto it = launch_of.find(static_cast<uint32_t>(e.correlation));
    out.launcher_handles.push_back(it != launch_of.end() ? it->second->handle : -1);
    if (it != launch_of.end()) e.launch_ns = it->second->time_ns - s.origin_ns;
  }
  return out;
}

void DeviceTracer::discard() {
  TracerState& s = state();
  if (!flush_completed(s)) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events.clear();
  s.event_threads.clear();
  s.dropped = 0;
  std::lock_guard<std::mutex> launch_lock(s.launch_mutex);
  s.launches.clear();
}

}  // namespace kiln::profiler
