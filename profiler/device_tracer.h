// The device tracer: the CUDA side of a recording. While it runs, CUPTI's activity API
// records every kernel, memcpy and memset with device timestamps, and for each the thread
// that launched it and when (a kernel's queued time), or, for memcpys, memsets and graph
// launches, the launching thread's innermost open event itself (Collector::current_handle,
// noted by a CUPTI callback on those calls), so that the profiler can name the op or scope
// that launched each record (launch_attribution.h). stop() waits for the device, flushes
// CUPTI's buffers and hands the records over as ProfileEvents (times on the profiler's
// clock), with the dropped-record count.
//
// The interface is free of CUDA headers: cupti_tracer.cpp implements it in CUDA builds,
// device_tracer_none.cpp in CPU-only builds (where start() reports why there is no device
// activity and the profiler records CPU columns only).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "event.h"

namespace kiln::profiler {

/// What a device recording produced.
struct DeviceRecords {
  /// Kernels, memcpys and memsets, in start order; `launcher` is still unset (-1), and
  /// `launch_ns` is when it was launched (-1: unknown).
  std::vector<ProfileEvent> events;
  /// Per event, the collector handle of the event open when it was launched, where the
  /// callback saw the launch (-1: it did not, or no event was open).
  std::vector<int64_t> launcher_handles;
  /// Per event, the launching thread (Collector::thread_id; 0: unknown).
  std::vector<uint64_t> launch_threads;
  /// Records CUPTI reported dropped (its buffers were full); their time is missing.
  uint64_t dropped = 0;
};

/// CUPTI activity recording for one profile at a time; see the file comment.
class DeviceTracer {
 public:
  /// Starts recording device activity with times relative to `origin`; returns "" on
  /// success, else why there is none (no GPU, CPU-only build, CUPTI error), and then
  /// records nothing.
  static std::string start(std::chrono::steady_clock::time_point origin);
  /// Waits for the current device, flushes CUPTI's buffers, stops recording and returns
  /// the records (empty when start() failed).
  static DeviceRecords stop();
  /// Drops everything recorded so far (after waiting for the current device) and goes on
  /// recording: the end of a schedule's warm-up.
  static void discard();
};

}  // namespace kiln::profiler
