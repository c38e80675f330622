// The per-thread start-ordered index behind LaunchAttribution (launch_attribution.h).
#include "launch_attribution.h"

#include <algorithm>

namespace kiln::profiler {

LaunchAttribution::LaunchAttribution(const std::vector<ProfileEvent>& host_events) : events_(host_events) {
  for (size_t i = 0; i < events_.size(); ++i)
    if (!on_device(events_[i].kind)) by_thread_[events_[i].thread].push_back(i);
  // A recording's events are in begin order already (the collector stamps them under its
  // lock); anything else is sorted.
  const auto by_start = [&](size_t a, size_t b) { return events_[a].start_ns < events_[b].start_ns; };
  for (auto& [thread, indices] : by_thread_)
    if (!std::is_sorted(indices.begin(), indices.end(), by_start))
      std::stable_sort(indices.begin(), indices.end(), by_start);
}

int64_t LaunchAttribution::innermost(uint64_t thread, int64_t time_ns) const {
  const auto found = by_thread_.find(thread);
  if (found == by_thread_.end()) return -1;
  const std::vector<size_t>& indices = found->second;
  // The last event to begin at or before the time...
  const auto after = std::upper_bound(indices.begin(), indices.end(), time_ns,
                                      [&](int64_t t, size_t i) { return t < events_[i].start_ns; });
  if (after == indices.begin()) return -1;
  auto index = static_cast<int64_t>(*(after - 1));
  // ...or the nearest of its enclosing events still open then.
  while (index >= 0 && events_[static_cast<size_t>(index)].end_ns < time_ns)
    index = events_[static_cast<size_t>(index)].parent;
  return index;
}

}  // namespace kiln::profiler
