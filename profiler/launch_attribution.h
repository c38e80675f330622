// Which op launched a kernel: the innermost host event of the launching thread that was open
// at the launch's host time. The device tracer learns both without a callback on every
// launch (cupti_tracer.cpp): CUPTI stamps each kernel record with the host time its launch
// was queued, and writes it into an activity buffer requested on the launching thread.
//
// Events of one thread nest (each begins after its parent and ends before it), so the
// innermost event open at time t is found from the last event of that thread to begin at or
// before t, walking up its parents past those that had already ended.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "event.h"

namespace kiln::profiler {

/// Looks up the innermost open host event per thread and time; see the file comment.
class LaunchAttribution {
 public:
  /// Indexes `host_events` (a recording's events, parents before children); keeps a
  /// reference to them, which must outlive this object.
  explicit LaunchAttribution(const std::vector<ProfileEvent>& host_events);
  /// The index of the innermost event on `thread` with start <= time_ns <= end, or -1 when
  /// none was open then (or the thread recorded nothing).
  int64_t innermost(uint64_t thread, int64_t time_ns) const;

 private:
  const std::vector<ProfileEvent>& events_;
  std::unordered_map<uint64_t, std::vector<size_t>> by_thread_;  // indices in start order
};

}  // namespace kiln::profiler
