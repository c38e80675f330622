// The device tracer: the CUDA side of a recording. While it runs, CUPTI's activity API
// records every kernel, memcpy and memset with device timestamps, and a CUPTI callback on
// each launching API call notes the launching thread's innermost open event
// (Collector::current_handle) under the launch's correlation id, so that a record names the
// op or scope that launched it. stop() waits for the device, flushes CUPTI's buffers and
// hands the records over as ProfileEvents (times on the profiler's clock), with the
// dropped-record count.
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
  /// Kernels, memcpys and memsets, in start order; `launcher` is still unset (-1).
  std::vector<ProfileEvent> events;
  /// Per event, the collector handle of the event open when it was launched (-1: none).
  std::vector<int64_t> launcher_handles;
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
