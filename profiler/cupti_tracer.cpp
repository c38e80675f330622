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
// never silently lost. The buffers are mapped (mmap), so they come zeroed page by page as
// CUPTI fills them, and CUPTI is told so (ZEROED_OUT_ACTIVITY_BUFFER): else CUPTI zeroes all
// 4 MiB inside the launch that asked for the buffer, which is the op's time in the table.
//
// Start-up: a thread's first recorded launch after start() is where CUPTI asks for that
// thread's buffer and sets up its per-thread state; on an H200 that put 2.0-2.7 ms into the
// first profiled op (examples/profile_linear's kiln::addmm, about 200 times its steady
// cost; PyTorch shows it as an "Activity Buffer Request" row). start() therefore ends with
// an empty kernel launched from the calling thread on a stream of the tracer's own, whose
// record stop() drops. Other threads still pay their own first launch, in their first op.
//
// Between profiles (DeviceTracerSetup::teardown; bench/profiler_startup compares the ways):
// CUPTI's hooks keep costing every launch while CUPTI is attached, even with every activity
// kind and callback off (+0.75 us per op on the H200, measured in issue 5), and only
// cuptiFinalize() detaches them; but a start() after a finalize sets CUPTI up again, 10-17 ms
// on the H200 (Kineto, which stays attached, starts in about 2 ms). So stop() only turns
// recording off, and a background thread finalizes once no profile started for
// finalize_idle_ms (1 s): profiles close together (a schedule's repeats, a loop of short
// profiles) start cheaply, and plain ops after the last one run as if CUPTI had never been
// there. The finalize runs at the exit of a CUDA call that thread makes, as CUPTI's
// documentation recommends for a detach, and an exit handler waits for one under way.
#include <cuda_runtime.h>
#include <cupti.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "../core/device.h"
#include "collector.h"
#include "cupti_records.h"
#include "device_tracer.h"

namespace kiln::profiler {

cudaError_t cupti_warm_up_cuda(cudaStream_t stream);  // cupti_warm_up.cu

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
// The call at whose exit a background finalize detaches CUPTI (as CUPTI's documentation
// recommends: from the exit callsite of a CUDA API call), made by the finalizing thread.
constexpr CUpti_CallbackId kFinalizeCall = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;

// One launching API call seen by the callback: its correlation id, the event open on its
// thread, its host time.
struct Launch {
  uint32_t correlation = 0;
  int64_t handle = -1;
  int64_t time_ns = 0;  // CLOCK_MONOTONIC
};

// A buffer in CUPTI's hands: the thread it was requested on, and whether it was mapped
// (zeroed by the kernel) or allocated.
struct BufferInfo {
  uint64_t thread = 0;
  bool mapped = false;
};

struct TracerState {
  // The records of the running profile, filled by buffer_completed (on CUPTI's thread or in a
  // flush) and handed over by stop().
  std::mutex mutex;
  bool running = false;
  int64_t origin_ns = 0;             // the profiler's time zero (CLOCK_MONOTONIC ns)
  std::vector<ProfileEvent> events;  // raw CUPTI times, kernel names still mangled
  uint64_t dropped = 0;
  std::vector<uint64_t> event_threads;  // per event: the launching thread (0: unknown)
  int64_t offset_ns = 0;                // CUPTI's clock minus CLOCK_MONOTONIC
  int warm_up_device = -1;              // where start() launched its warm-up kernel (-1: nowhere),
  uint32_t warm_up_stream = 0;          // and on which stream (CUPTI's id): its records are dropped
  // The launches the callback saw, appended by the launching threads (under their own mutex:
  // the activity buffers are parsed under the other one, on CUPTI's thread).
  std::mutex launch_mutex;
  std::vector<Launch> launches;
  // The buffers in CUPTI's hands (under their own mutex: CUPTI may ask for a buffer inside
  // any CUDA call, including those start() makes).
  std::mutex buffer_mutex;
  std::unordered_map<const uint8_t*, BufferInfo> buffers;
  std::atomic<bool> map_buffers{true};  // what buffer_requested hands out (zeroed_buffers)

  // CUPTI's set-up, under setup_mutex: taken before `mutex`, and never by a CUPTI callback,
  // so it may be held across CUPTI calls that flush (a finalize) or ask for buffers.
  std::mutex setup_mutex;
  std::condition_variable setup_changed;
  DeviceTracerSetup setup;  // the defaults, unless bench/profiler_startup changed them
  bool registered = false;  // attributes, timestamp and buffer callbacks (again after each cuptiFinalize)
  CUpti_SubscriberHandle subscriber = nullptr;
  uint64_t starts = 0;   // start()s so far: a background finalize goes ahead only if none came since
  bool exiting = false;  // the process is exiting: no more background finalizes
  bool exit_hook = false;
  DeviceTracerStartCost last_start;
  std::unordered_map<int, cudaStream_t> warm_up_streams;  // per device, created once
};

TracerState& state() {
  static TracerState* s = new TracerState();  // immortal: CUPTI may call back during exit
  return *s;
}

thread_local bool t_finalizing = false;  // this thread makes kFinalizeCall to finalize CUPTI
thread_local bool t_finalized = false;

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

// Called on the thread whose records the buffer will hold (per-thread buffers). A mapped
// buffer comes zeroed from the kernel page by page as CUPTI writes it; an allocated one CUPTI
// zeroes itself, all 4 MiB at once, inside the launch that asked for it.
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  TracerState& s = state();
  const bool mapped = s.map_buffers.load(std::memory_order_relaxed);
  void* memory = nullptr;
  if (mapped) {
    memory = mmap(nullptr, kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) memory = nullptr;
  } else {
    memory = std::aligned_alloc(kBufferAlign, kBufferBytes);
  }
  *buffer = static_cast<uint8_t*>(memory);
  *size = memory != nullptr ? kBufferBytes : 0;  // 0: CUPTI drops records and counts them
  *max_records = 0;                              // as many as fit
  if (memory == nullptr) return;
  std::lock_guard<std::mutex> lock(s.buffer_mutex);
  s.buffers[*buffer] = BufferInfo{Collector::thread_id(), mapped};
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_size) {
  TracerState& s = state();
  BufferInfo info;
  {
    std::lock_guard<std::mutex> lock(s.buffer_mutex);
    if (const auto it = s.buffers.find(buffer); it != s.buffers.end()) {
      info = it->second;
      s.buffers.erase(it);
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      if (!s.running) continue;
      if (std::optional<ProfileEvent> e = event_of(record)) {
        s.events.push_back(std::move(*e));
        s.event_threads.push_back(info.thread);  // the buffer's thread launched it
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  }
  if (info.mapped)
    (void)munmap(buffer, kBufferBytes);
  else
    std::free(buffer);
}

// At the entry of a memcpy, memset or graph launch: who issued it, and when. At the exit of
// kFinalizeCall on the finalizing thread: detaches CUPTI.
void CUPTIAPI on_launch(void*, CUpti_CallbackDomain, CUpti_CallbackId id, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (id == kFinalizeCall) {
    if (t_finalizing && call->callbackSite == CUPTI_API_EXIT) t_finalized = cuptiFinalize() == CUPTI_SUCCESS;
    return;
  }
  if (call->callbackSite != CUPTI_API_ENTER) return;
  const int64_t handle = Collector::current_handle();
  if (handle < 0) return;  // outside every event: no launcher to name
  const auto now = static_cast<int64_t>(monotonic_ns());
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  s.launches.push_back(Launch{call->correlationId, handle, now});
}

int64_t ns_since(uint64_t t0) { return static_cast<int64_t>(monotonic_ns() - t0); }

template <typename T>
void set_attribute(CUpti_ActivityAttribute attribute, T value) {
  size_t size = sizeof(value);
  (void)cuptiActivitySetAttribute(attribute, &size, &value);
}

// Sets CUPTI up for a profile (setup_mutex held): attributes and buffer callbacks when CUPTI
// is not set up (the first start, or after a finalize), the subscriber's callbacks, latency
// timestamps and the activity kinds. Returns "" or the error.
std::string start_cupti(TracerState& s, DeviceTracerStartCost& cost) {
  uint64_t t0 = monotonic_ns();
  cost.was_set_up = s.registered;
  if (!s.registered) {
    if (s.setup.preallocated_device_buffers > 0)
      set_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, s.setup.preallocated_device_buffers);
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
    // Buffers come zeroed (mapped): CUPTI need not zero 4 MiB inside the launch that asks.
    set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, uint8_t{s.setup.zeroed_buffers});
    s.map_buffers.store(s.setup.zeroed_buffers, std::memory_order_relaxed);
    if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
      return cupti_error("cuptiActivityRegisterCallbacks", r);
    s.registered = true;
  }
  cost.setup_ns = ns_since(t0);
  t0 = monotonic_ns();
  if (s.subscriber == nullptr) {
    if (CUptiResult r = cuptiSubscribe(&s.subscriber, on_launch, nullptr); r != CUPTI_SUCCESS) {
      s.subscriber = nullptr;
      return cupti_error("cuptiSubscribe", r);
    }
  }
  for (CUpti_CallbackId api : kRuntimeCallbacks)
    if (CUptiResult r = cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, api); r != CUPTI_SUCCESS)
      return cupti_error("cuptiEnableCallback", r);
  cost.subscribe_ns = ns_since(t0);
  t0 = monotonic_ns();
  // Kernel records get the host time their launch was queued: with their thread, the launcher.
  if (CUptiResult r = cuptiActivityEnableLatencyTimestamps(1); r != CUPTI_SUCCESS)
    return cupti_error("cuptiActivityEnableLatencyTimestamps", r);
  for (CUpti_ActivityKind kind : kKinds)
    if (CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) return cupti_error("cuptiActivityEnable", r);
  cost.enable_ns = ns_since(t0);
  return "";
}

// Launches the warm-up kernel on this thread, on a stream of the tracer's own (so that it
// joins no stream, graph capture or queue of the user's); returns its device and CUPTI
// stream id, or {-1, 0} when there is none to drop later.
std::pair<int, uint32_t> warm_up(TracerState& s) {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) return {-1, 0};
  cudaStream_t& stream = s.warm_up_streams[device];
  if (stream == nullptr && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    stream = nullptr;
    (void)cudaGetLastError();
    return {-1, 0};
  }
  uint32_t stream_id = 0;
  if (cuptiGetStreamIdEx(nullptr, reinterpret_cast<CUstream>(stream), 0, &stream_id) != CUPTI_SUCCESS) return {-1, 0};
  // A failed launch is not the profile's concern: the first op then pays what it would have.
  if (cupti_warm_up_cuda(stream) != cudaSuccess) return {-1, 0};
  return {device, stream_id};
}

// After a background thread's wait: detaches CUPTI unless a start() came (setup_mutex
// held). The finalize runs at the exit of a CUDA call this thread makes, as CUPTI's
// documentation recommends, and directly if the callback did not run.
void finalize_unless_started(TracerState& s, uint64_t starts) {
  if (s.starts != starts || s.exiting || s.subscriber == nullptr) return;
  t_finalizing = true;
  t_finalized = false;
  if (cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, kFinalizeCall) == CUPTI_SUCCESS) {
    int device = 0;
    (void)cudaGetDevice(&device);
  }
  if (!t_finalized) (void)cuptiFinalize();
  t_finalizing = false;
  s.registered = false;
  s.subscriber = nullptr;
}

// Hands the finalize to a detached thread that waits `delay_ms` for a start() first (setup_mutex held).
void finalize_later(TracerState& s, int64_t delay_ms) {
  if (!s.exit_hook) {
    // At exit, waits for a finalize under way and lets no other begin.
    s.exit_hook = std::atexit([] {
                    TracerState& st = state();
                    std::lock_guard<std::mutex> lock(st.setup_mutex);
                    st.exiting = true;
                    st.setup_changed.notify_all();
                  }) == 0;
  }
  const uint64_t starts = s.starts;
  std::thread([starts, delay_ms] {
    TracerState& st = state();
    std::unique_lock<std::mutex> lock(st.setup_mutex);
    st.setup_changed.wait_for(lock, std::chrono::milliseconds(delay_ms),
                              [&] { return st.starts != starts || st.exiting; });
    finalize_unless_started(st, starts);
  }).detach();
}

// Undoes a start() that failed part way (setup_mutex held): no recording, no subscriber.
// (No finalize: the failure may be another tool holding CUPTI.)
void undo_start(TracerState& s) {
  for (CUpti_ActivityKind kind : kKinds) (void)cuptiActivityDisable(kind);
  (void)cuptiActivityEnableLatencyTimestamps(0);
  if (s.subscriber != nullptr) (void)cuptiUnsubscribe(s.subscriber);
  s.subscriber = nullptr;
}

// Undoes start() as the set-up's teardown says (setup_mutex held, `mutex` not: a finalize
// hands back buffers).
void stop_cupti(TracerState& s) {
  const CuptiTeardown teardown = s.setup.teardown;
  for (CUpti_ActivityKind kind : kKinds) (void)cuptiActivityDisable(kind);
  if (teardown != CuptiTeardown::Disable) (void)cuptiActivityEnableLatencyTimestamps(0);
  const bool keep_subscriber = teardown == CuptiTeardown::DisableKeepSubscriber ||
                               teardown == CuptiTeardown::FinalizeInBackground ||
                               teardown == CuptiTeardown::FinalizeWhenIdle;
  if (s.subscriber != nullptr && keep_subscriber) {
    for (CUpti_CallbackId api : kRuntimeCallbacks)
      (void)cuptiEnableCallback(0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, api);
  } else if (s.subscriber != nullptr) {
    (void)cuptiUnsubscribe(s.subscriber);
    s.subscriber = nullptr;
  }
  switch (teardown) {
    case CuptiTeardown::Finalize:
      // Unhooks CUPTI from every launch (see the file comment); set up again by the next start().
      if (cuptiFinalize() == CUPTI_SUCCESS) {
        s.registered = false;
        s.subscriber = nullptr;
      }
      break;
    case CuptiTeardown::FinalizeInBackground:
      finalize_later(s, 0);
      break;
    case CuptiTeardown::FinalizeWhenIdle:
      finalize_later(s, s.setup.finalize_idle_ms);
      break;
    case CuptiTeardown::DisableReset:
      set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, uint8_t{0});
      set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, uint8_t{0});
      s.registered = false;  // the next start() sets them again
      break;
    case CuptiTeardown::Disable:
    case CuptiTeardown::DisableAll:
    case CuptiTeardown::DisableKeepSubscriber:
      break;
  }
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
  std::lock_guard<std::mutex> setup_lock(s.setup_mutex);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.running) return "the device tracer is already recording";
  }
  ++s.starts;  // a background finalize still waiting gives up
  s.setup_changed.notify_all();
  DeviceTracerStartCost cost;
  if (std::string error = start_cupti(s, cost); !error.empty()) {
    undo_start(s);
    s.last_start = cost;
    return error + " (CPU columns only)";
  }
  uint64_t cupti_now = 0;
  const uint64_t mono_now = monotonic_ns();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.offset_ns = cuptiGetTimestamp(&cupti_now) == CUPTI_SUCCESS
                      ? static_cast<int64_t>(cupti_now) - static_cast<int64_t>(mono_now)
                      : 0;
    s.origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(origin.time_since_epoch()).count();
    s.events.clear();
    s.event_threads.clear();
    s.dropped = 0;
    s.warm_up_device = -1;
    {
      std::lock_guard<std::mutex> launch_lock(s.launch_mutex);
      s.launches.clear();
    }
    s.running = true;
  }
  // CUPTI's work for this thread's first recorded launch (its activity buffer, its
  // per-thread state) is done here, not in the first op.
  if (s.setup.warm_up) {
    const uint64_t t0 = monotonic_ns();
    const auto [device, stream_id] = warm_up(s);
    cost.warm_up_ns = ns_since(t0);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.warm_up_device = device;
    s.warm_up_stream = stream_id;
  }
  s.last_start = cost;
  return "";
}

DeviceRecords DeviceTracer::stop() {
  TracerState& s = state();
  if (!flush_completed(s)) return {};

  std::vector<ProfileEvent> events;  // in CUPTI's order, on CUPTI's clock
  std::vector<uint64_t> threads;     // per event: its launching thread
  DeviceRecords out;
  std::vector<Launch> launches;
  int warm_up_device = -1;
  uint32_t warm_up_stream = 0;
  {
    std::lock_guard<std::mutex> setup_lock(s.setup_mutex);
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.running = false;
      events = std::move(s.events);
      threads = std::move(s.event_threads);
      out.dropped = s.dropped;
      s.events.clear();
      s.event_threads.clear();
      warm_up_device = s.warm_up_device;
      warm_up_stream = s.warm_up_stream;
      std::lock_guard<std::mutex> launch_lock(s.launch_mutex);
      launches = std::move(s.launches);
      s.launches.clear();
    }
    stop_cupti(s);
  }

  std::unordered_map<uint32_t, const Launch*> launch_of;
  launch_of.reserve(launches.size());
  for (const Launch& l : launches) launch_of[l.correlation] = &l;
  std::unordered_map<std::string, std::string> demangled;
  const int64_t device_origin = s.origin_ns + s.offset_ns;  // time zero on CUPTI's clock
  // The events to keep (all but the warm-up kernel's), then in start order.
  std::vector<size_t> order;
  order.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    ProfileEvent& e = events[i];
    if (e.kind == EventKind::Kernel && e.device == warm_up_device && e.thread == warm_up_stream) continue;
    order.push_back(i);
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

void DeviceTracer::set_setup(const DeviceTracerSetup& setup) {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.setup_mutex);
  s.setup = setup;
  s.registered = false;  // the next start() sets the attributes again
}

DeviceTracerSetup DeviceTracer::setup() {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.setup_mutex);
  return s.setup;
}

DeviceTracerStartCost DeviceTracer::last_start_cost() {
  TracerState& s = state();
  std::lock_guard<std::mutex> lock(s.setup_mutex);
  return s.last_start;
}

}  // namespace kiln::profiler
