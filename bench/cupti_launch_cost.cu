// What CUPTI costs a kernel launch, and the two CUPTI behaviours the profiler's device tracer
// relies on (profiler/cupti_tracer.cpp), measured on bare launches of an empty kernel with no
// Kiln code in the way:
// 1. host µs per launch under each CUPTI set-up (kernel records, latency timestamps, callbacks,
//    runtime-API records), every set-up made, timed over 200 launches and torn down with
//    cuptiFinalize in turns within one process; medians of the rounds;
// 2. a kernel record's queued time lies inside its launching call (host clock reads just
//    before and after each launch, on CLOCK_MONOTONIC through CUPTI's timestamp callback);
// 3. a kernel record arrives in an activity buffer CUPTI requested on the launching thread,
//    with three threads launching at once (a launch callback gives the ground truth).
//
//   cupti_launch_cost [rounds]        (default 41)
#include <cuda_runtime.h>
#include <cupti.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

__global__ void empty_kernel(float* p) {
  if (threadIdx.x == 0 && p == nullptr) p[0] = 0.0f;  // never true: the kernel does nothing
}

constexpr size_t kBufferBytes = size_t{4} << 20;
constexpr int kCallsPerBatch = 200;

thread_local int t_tag = -1;  // this program's number for the calling thread (-1: CUPTI's)

std::mutex g_mutex;
bool g_keep = false;                                   // keep kernel records (checks 2 and 3)
std::unordered_map<const uint8_t*, int> g_buffer_tag;  // buffer -> thread it was requested on
std::vector<std::pair<uint32_t, uint64_t>> g_queued;   // correlation -> queued time
std::vector<std::pair<uint32_t, int>> g_record_tag;    // correlation -> its buffer's thread
std::unordered_map<uint32_t, int> g_launch_tag;        // correlation -> launching thread (callback)
std::vector<uint64_t> g_callback_log;                  // what the recording callback writes

uint64_t CUPTIAPI monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_buffer_tag[*buffer] = t_tag;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const int tag = g_buffer_tag.count(buffer) ? g_buffer_tag[buffer] : -2;
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (!g_keep || record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      g_queued.push_back({uint32_t(k->correlationId), uint64_t(k->queued)});
      g_record_tag.push_back({uint32_t(k->correlationId), tag});
    }
    g_buffer_tag.erase(buffer);
  }
  std::free(buffer);
}

void CUPTIAPI empty_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// What the profiler's launch callback did before: correlation id, thread and time, under a mutex.
void CUPTIAPI recording_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite != CUPTI_API_ENTER) return;
  const uint64_t now = monotonic_ns();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_keep)
    g_launch_tag[call->correlationId] = t_tag;
  else
    g_callback_log.push_back(call->correlationId ^ now);
}

constexpr CUpti_CallbackId kLaunches[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                          CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000};
constexpr CUpti_CallbackId kCopies[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020};

struct SetUp {
  const char* name;
  bool kernel_records = false;
  bool latency = false;          // queued times in kernel records
  bool copy_records = false;     // MEMCPY and MEMSET records
  bool runtime_records = false;  // runtime-API records for the launch calls
  CUpti_CallbackFunc callback = nullptr;
  bool callback_on_copies = false;  // else on launches
};

CUpti_SubscriberHandle g_subscriber = nullptr;

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = "?";
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "%s: %s\n", what, text);
  std::exit(1);
}

void begin(const SetUp& s) {
  if (s.kernel_records || s.runtime_records) {
    report(cuptiActivityRegisterTimestampCallback(monotonic_ns), "cuptiActivityRegisterTimestampCallback");
    report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  }
  if (s.latency) report(cuptiActivityEnableLatencyTimestamps(1), "cuptiActivityEnableLatencyTimestamps");
  if (s.callback != nullptr) {
    report(cuptiSubscribe(&g_subscriber, s.callback, nullptr), "cuptiSubscribe");
    if (s.callback_on_copies) {
      for (CUpti_CallbackId id : kCopies)
        report(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id), "cuptiEnableCallback");
    } else {
      for (CUpti_CallbackId id : kLaunches)
        report(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id), "cuptiEnableCallback");
    }
  }
  if (s.runtime_records)
    for (CUpti_CallbackId id : kLaunches) report(cuptiActivityEnableRuntimeApi(id, 1), "cuptiActivityEnableRuntimeApi");
  if (s.kernel_records) report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
  if (s.copy_records) {
    report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable");
    report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable");
  }
}

void end(const SetUp& s) {
  if (!s.kernel_records && !s.runtime_records && s.callback == nullptr) return;
  cudaDeviceSynchronize();
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    (void)cuptiActivityDisable(kind);
  if (s.runtime_records)
    for (CUpti_CallbackId id : kLaunches) (void)cuptiActivityEnableRuntimeApi(id, 0);
  if (s.latency) (void)cuptiActivityEnableLatencyTimestamps(0);
  if (g_subscriber != nullptr) (void)cuptiUnsubscribe(g_subscriber);
  g_subscriber = nullptr;
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  report(cuptiFinalize(), "cuptiFinalize");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_callback_log.clear();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 41;
  t_tag = 0;
  float* p = nullptr;
  if (cudaMalloc(&p, 1024) != cudaSuccess) {
    std::printf("cupti_launch_cost: no CUDA device\n");
    return 0;
  }
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 32>>>(p);
  cudaDeviceSynchronize();
  g_callback_log.reserve(1 << 16);

  // 1. Cost per launch.
  const std::vector<SetUp> setups = {
      {"none"},
      {"CONCURRENT_KERNEL records", true},
      {"+ latency timestamps", true, true},
      {"+ MEMCPY/MEMSET records, callback on copies", true, true, true, false, recording_callback, true},
      {"kernel records + callback on every launch", true, false, false, false, recording_callback},
      {"kernel records + runtime-API records", true, false, false, true},
      {"callback on every launch alone", false, false, false, false, empty_callback},
  };
  std::vector<std::vector<double>> samples(setups.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < setups.size(); ++i) {
      begin(setups[i]);
      empty_kernel<<<1, 32>>>(p);  // the first launch under a set-up stays untimed
      cudaDeviceSynchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < kCallsPerBatch; ++k) empty_kernel<<<1, 32>>>(p);
      const auto t1 = std::chrono::steady_clock::now();
      samples[i].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kCallsPerBatch);
      end(setups[i]);
    }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("cupti_launch_cost: host us per <<<1, 32>>> launch of an empty kernel on %s\n", prop.name);
  std::printf("batches of %d launches, set-ups in turns, median of %d rounds\n\n", kCallsPerBatch, rounds);
  const double none = median(samples[0]);
  std::printf("%-48s %10s %10s\n", "CUPTI set-up", "us/launch", "added");
  for (size_t i = 0; i < setups.size(); ++i)
    std::printf("%-48s %10.3f %+10.3f\n", setups[i].name, median(samples[i]), median(samples[i]) - none);
  // For the gpu-check summary: what kernel records cost, and what each way of tying a kernel
  // to its launching op costs on top of them.
  const double records = median(samples[1]) - none;
  std::printf("\nRESULT cupti_kernel_records_added_us %.3f\n", records);
  std::printf("RESULT cupti_tie_latency_added_us %.3f\n", median(samples[2]) - none - records);
  std::printf("RESULT cupti_tie_profiler_setup_added_us %.3f\n", median(samples[3]) - none - records);
  std::printf("RESULT cupti_tie_callback_added_us %.3f\n", median(samples[4]) - none - records);
  std::printf("RESULT cupti_tie_runtime_records_added_us %.3f\n", median(samples[5]) - none - records);

  // 2. Queued times lie inside the launching call.
  {
    const SetUp s{"queued", true, true};
    g_keep = true;
    begin(s);
    std::vector<std::pair<uint64_t, uint64_t>> calls(2000);
    for (auto& c : calls) {
      c.first = monotonic_ns();
      empty_kernel<<<1, 32>>>(p);
      c.second = monotonic_ns();
    }
    end(s);
    std::sort(g_queued.begin(), g_queued.end());  // correlation ids grow with the launches
    size_t inside = 0;
    for (size_t i = 0; i < std::min(calls.size(), g_queued.size()); ++i)
      inside += g_queued[i].second >= calls[i].first && g_queued[i].second <= calls[i].second;
    std::printf("\nqueued time inside its launching call: %zu of %zu kernels (%zu launched)\n", inside, g_queued.size(),
                calls.size());
    g_queued.clear();
    g_record_tag.clear();
  }

  // 3. Records arrive in a buffer requested on the launching thread.
  {
    const SetUp s{"threads", true, true, false, false, recording_callback};
    begin(s);
    constexpr int kThreads = 3, kLaunchesPerThread = 3000;
    std::atomic<int> ready{0};
    auto launch = [&](int tag) {
      t_tag = tag;
      cudaStream_t stream = nullptr;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kLaunchesPerThread; ++i) empty_kernel<<<1, 32, 0, stream>>>(p);
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    };
    std::vector<std::thread> threads;
    for (int k = 1; k < kThreads; ++k) threads.emplace_back(launch, k);
    launch(0);
    for (std::thread& t : threads) t.join();
    end(s);
    size_t same = 0, known = 0;
    for (const auto& [correlation, tag] : g_record_tag) {
      const auto it = g_launch_tag.find(correlation);
      if (it == g_launch_tag.end()) continue;
      ++known;
      same += it->second == tag;
    }
    std::printf("record in a buffer of its launching thread: %zu of %zu kernels (%d threads x %d launches)\n", same,
                known, kThreads, kLaunchesPerThread);
  }
  cudaFree(p);
  return 0;
}
