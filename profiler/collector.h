// The collector: the process-wide sink that op scopes and RecordFunction write to while a
// Profiler records. It outlives every Profiler (it is never destroyed), so a scope that
// closes after its profiler stopped, or was destroyed, finds a collector that simply ignores
// it. Indices of events are their begin order, so a parent always precedes its children.
//
// With nothing recording, begin() costs one relaxed atomic load. While recording, each event
// is a compact record (an op's static name by pointer, names and shapes of others aside)
// that stop() expands into ProfileEvents: the per-op cost is one small write, which matters
// most beside CUPTI's own work on every launch.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "event.h"

namespace kiln::profiler {

/// Receives host events while a profile records; see the file comment.
class Collector {
 public:
  /// The one collector of the process.
  static Collector& instance();

  /// True while a profiler records.
  bool active() const { return active_.load(std::memory_order_relaxed); }
  /// Opens an event on this thread; returns a handle for end(), or -1 when not recording.
  int64_t begin(std::string name, EventKind kind, std::vector<std::vector<int64_t>> shapes = {});
  /// Opens the event of op `op_name` ("add": named "kiln::add"), a static string that
  /// outlives the recording; returns a handle for end(), or -1 when not recording.
  int64_t begin_op(const char* op_name, std::vector<std::vector<int64_t>> shapes = {});
  /// Closes the event `handle` from begin() (ignored if the recording it belongs to ended).
  void end(int64_t handle);

  /// Sets the FLOPs, bytes and math kind of the event `handle` (with_flops).
  void set_cost(int64_t handle, double flops, double bytes, MathKind math);
  /// Attributes `bytes` (+allocated, -freed) on `device` to this thread's innermost open
  /// event (an allocator's memory observer; ignored outside events and recordings).
  void memory(bool cuda, int64_t bytes);

  /// The handle of the calling thread's innermost open event, or -1: what the device
  /// tracer ties a launch to. Lock-free (thread-local state only).
  static int64_t current_handle();
  /// The calling thread's number, as host events record it in `thread` (from 1, fixed for
  /// the thread's life). Lock-free.
  static uint64_t thread_id();

  /// Starts a recording (clearing any previous events); `origin` is time zero.
  void start(std::chrono::steady_clock::time_point origin);
  /// Ends the recording and hands over its events; events still open end now.
  std::vector<ProfileEvent> stop();
  /// Nanoseconds since the recording's origin.
  int64_t now_ns() const;
  /// The current recording's number (each start() begins a new one).
  uint64_t generation() const;
  /// The index of the event that `handle` (from begin()) names in the events of recording
  /// `generation`, or nullopt when it belongs to another recording.
  static std::optional<size_t> index_in(int64_t handle, uint64_t generation);

 private:
  // One event while recording (88 bytes, against a ProfileEvent's 248).
  struct Record {
    int64_t start_ns = 0, end_ns = -1;  // end -1: still open
    int64_t parent = -1;
    uint64_t thread = 0;
    const char* op_name = nullptr;  // an op's static name; else names_[name_index]
    int64_t cpu_memory_bytes = 0, cuda_memory_bytes = 0;
    uint32_t name_index = 0;
    uint32_t shapes_index = 0;  // shapes_[shapes_index - 1]; 0: none recorded
    EventKind kind = EventKind::CpuOp;
    MathKind math = MathKind::None;
    double flops = 0, bytes = 0;
  };

  Collector() = default;
  // Opens a record on this thread, named `op_name` (an op) or `*name` (moved from); returns
  // its handle, or -1 when not recording.
  int64_t open(EventKind kind, const char* op_name, std::string* name, std::vector<std::vector<int64_t>> shapes);
  // The index of the event `handle` names, if it belongs to the current recording (mutex held).
  std::optional<size_t> live_index(int64_t handle) const;

  std::atomic<bool> active_{false};
  mutable std::mutex mutex_;
  std::vector<Record> records_;
  std::vector<std::string> names_;                         // of events other than ops
  std::vector<std::vector<std::vector<int64_t>>> shapes_;  // recorded input shapes
  uint64_t generation_ = 0;  // one per recording; stale thread stacks and handles are ignored
  std::chrono::steady_clock::time_point origin_{};
};

}  // namespace kiln::profiler
