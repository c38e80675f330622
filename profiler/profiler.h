// Profiler: torch.profiler.profile for C++. While it records, every op (through the op
// scope, ops/op_scope.h) and every RecordFunction scope becomes an event with its CPU time,
// nesting and, with record_shapes, its input shapes; key_averages() sums them into
// PyTorch's table and export_chrome_trace() writes a trace Perfetto opens.
//
//   kiln::profiler::Profiler prof({.record_shapes = true});
//   prof.start();
//   ... run ops ...
//   prof.stop();
//   std::cout << prof.key_averages().table({.sort_by = "cpu_time_total", .row_limit = 10});
//
// With a schedule, step() moves through wait / warmup / active steps as torch.profiler does,
// each recorded step is a "ProfilerStep#N" scope holding its ops, and on_trace_ready runs
// at the end of every active span. One profiler records at a time.
//
// With Activity::CUDA (and a GPU), the device tracer (device_tracer.h, CUPTI) records every
// kernel, memcpy and memset with device timestamps, each tied to the op that launched it;
// without a GPU or CUPTI the profile has CPU columns only and device_activity_status() says
// why.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "event.h"
#include "key_averages.h"
#include "schedule.h"

namespace kiln::profiler {

/// What a profiler records (torch.profiler.ProfilerActivity).
enum class Activity { CPU, CUDA };

class Profiler;

/// torch.profiler.profile's arguments.
struct ProfilerOptions {
  std::vector<Activity> activities = {Activity::CPU, Activity::CUDA};
  bool record_shapes = false;  ///< record each op's input shapes (group_by_input_shape needs them)
  bool profile_memory = false;
  bool with_flops = false;
  std::optional<Schedule> schedule{};               ///< none: record from start() to stop()
  std::function<void(Profiler&)> on_trace_ready{};  ///< called when a recorded span ends
};

/// Records ops and scopes between start() and stop(); see the file comment.
class Profiler {
 public:
  /// A profiler with `options`; it records nothing until start().
  explicit Profiler(ProfilerOptions options = {});
  /// Stops recording if still running.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Begins profiling (at step 0 of the schedule, if any); throws kiln::Error when another
  /// profiler is running.
  void start();
  /// Ends profiling; the events recorded so far stay available (and on_trace_ready runs if a
  /// scheduled span was recording).
  void stop();
  /// Marks the end of a step of the loop being profiled (moves the schedule on).
  void step();

  /// True between start() and stop().
  bool running() const { return running_; }
  /// The events of the last recorded span, in begin order.
  const std::vector<ProfileEvent>& events() const { return events_; }
  /// The events summed per name (and per input shapes).
  KeyAverages key_averages(bool group_by_input_shape = false) const;
  /// Writes the events as Chrome trace JSON (Perfetto, chrome://tracing); throws
  /// kiln::Error when the file cannot be written.
  void export_chrome_trace(const std::string& path) const;
  /// The options it was made with.
  const ProfilerOptions& options() const { return options_; }
  /// Steps taken since start().
  int64_t step_number() const { return step_; }
  /// "" when the last recording traced device activity (CUPTI); else why it did not
  /// ("no CUDA device is visible", "CUDA activity was not requested", a CUPTI error, ...).
  const std::string& device_activity_status() const { return device_status_; }
  /// Device activity records CUPTI dropped in the last recording (0 when none were lost).
  uint64_t dropped_device_records() const { return dropped_device_records_; }

 private:
  void begin_recording();
  void end_recording(bool deliver);
  void open_step_scope();
  void close_step_scope();
  void start_collector();  // a new host recording; generation_ names it
  // The recording traces device activity (CUPTI started without an error).
  bool tracing_device() const { return recording_ && device_status_.empty(); }

  ProfilerOptions options_;
  bool running_ = false;
  bool recording_ = false;  // the collector is ours
  int64_t step_ = 0;
  ProfilerAction action_ = ProfilerAction::None;
  std::vector<ProfileEvent> events_;
  std::chrono::steady_clock::time_point origin_{};
  uint64_t generation_ = 0;  // the collector's recording whose handles the device records carry
  std::string device_status_ = "not recorded yet";
  uint64_t dropped_device_records_ = 0;
  int64_t step_scope_ = -1;  // the open "ProfilerStep#N" scope (with a schedule)
};

/// Starts `profiler` for the scope and stops it at the end (with profile(...) as prof:).
class ProfileGuard {
 public:
  /// Starts `profiler`.
  explicit ProfileGuard(Profiler& profiler) : profiler_(profiler) { profiler_.start(); }
  /// Stops it.
  ~ProfileGuard() { profiler_.stop(); }
  ProfileGuard(const ProfileGuard&) = delete;
  ProfileGuard& operator=(const ProfileGuard&) = delete;

 private:
  Profiler& profiler_;
};

}  // namespace kiln::profiler
