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

/// How stop() leaves CUPTI between profiles (cupti_tracer.cpp says why it matters). The
/// tracer uses DeviceTracerSetup's default; the others exist for bench/profiler_startup,
/// which compares them (scripts/profiler_startup_experiment.sh).
enum class CuptiTeardown {
  Finalize,               ///< cuptiFinalize in stop(): CUPTI detached, the next start() sets it up again
  FinalizeInBackground,   ///< stop() turns recording off; a background thread finalizes right after
  FinalizeWhenIdle,       ///< the same once no profile started for `finalize_idle_ms`
  Disable,                ///< activity kinds off, callbacks unsubscribed; CUPTI stays attached
  DisableAll,             ///< Disable, and latency timestamps off
  DisableKeepSubscriber,  ///< DisableAll, but the subscriber stays, with its callbacks off
  DisableReset,           ///< DisableAll, and the activity attributes the tracer set back to CUPTI's defaults
};

/// The tracer's choices that bench/profiler_startup varies (never a user setting); the
/// defaults are what the tracer does.
struct DeviceTracerSetup {
  CuptiTeardown teardown = CuptiTeardown::FinalizeWhenIdle;
  /// start() launches an empty kernel on the calling thread, so that CUPTI's set-up for that
  /// thread's first recorded launch is paid in start(), not by the first profiled op.
  bool warm_up = true;
  /// Activity buffers come zeroed from mmap (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER),
  /// else CUPTI zeroes each 4 MiB buffer itself on the launching thread.
  bool zeroed_buffers = true;
  /// CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE when CUPTI is set up (0: CUPTI's default, 3).
  size_t preallocated_device_buffers = 0;
  /// FinalizeWhenIdle: how long after a stop() the background thread waits for another start().
  int64_t finalize_idle_ms = 1000;
};

/// What the last DeviceTracer::start() spent, per phase, in nanoseconds.
struct DeviceTracerStartCost {
  int64_t setup_ns = 0;      ///< attributes and buffer callbacks (when CUPTI was not set up)
  int64_t subscribe_ns = 0;  ///< the subscriber and its callbacks
  int64_t enable_ns = 0;     ///< latency timestamps and the activity kinds
  int64_t warm_up_ns = 0;    ///< the warm-up launch
  bool was_set_up = false;   ///< CUPTI was still set up from an earlier profile
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

  /// Changes the tracer's set-up (bench/profiler_startup only; between profiles).
  static void set_setup(const DeviceTracerSetup& setup);
  /// The tracer's set-up.
  static DeviceTracerSetup setup();
  /// What the last start() spent, phase by phase.
  static DeviceTracerStartCost last_start_cost();
};

}  // namespace kiln::profiler
