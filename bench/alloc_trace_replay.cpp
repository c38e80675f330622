// Replays allocation traces through Kiln's caching allocator, with classic segments and with
// expandable segments, and reports per trace what the comparison with PyTorch's allocator
// (bench/alloc_trace_replay.py, the same traces) needs: peak reserved and peak allocated
// bytes, non-releasable (inactive split) bytes at the moment of peak reserved, at their own
// peak and at the end, the device calls (segments or pages created and released, pages mapped
// and unmapped), the times the host waited for the GPU before unmapping pages, and the replay
// time (of a run of its own: the figures come from a second run that reads the statistics
// after every event).
//
//   alloc_trace_replay [--device cpu|cuda] [--config default|expandable|both] [--gpu-lag N] [--json] TRACE...
//
// Each (trace, config) runs on an allocator of its own, so nothing cached by one run serves
// the next. On the CPU the host source's 2 MiB pages stand in for the GPU's, so the figures
// predict the GPU's except for the replay time. A trace holds no GPU work, so its events
// complete at once; --gpu-lag N (CPU only) completes each event only N trace events after it
// was recorded, as a GPU running behind the host would: free pages wait that long before they
// can move, and the figures show what that costs in reserved bytes and in waits. --json prints
// one JSON object per line (bench/alloc_trace_compare.py reads them).
#include <kiln/kiln.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_map>

#include "allocator/host_segment_source.h"
#include "bench/alloc_trace.h"
#ifdef KILN_WITH_CUDA
#include "allocator/cuda_segment_source.h"
#endif

using namespace kiln;

namespace {

struct Result {
  std::string trace, config;
  size_t events = 0;
  int64_t peak_reserved = 0, peak_allocated = 0, non_releasable_at_peak = 0, peak_non_releasable = 0,
          end_non_releasable = 0, end_reserved = 0;
  int64_t device_allocs = 0, device_frees = 0, map_calls = 0, unmap_calls = 0, unmap_waits = 0;
  double ms = 0;
};

/// The device's source; on the CPU, `host` is set to it (events completed by hand when
/// `manual_events`).
std::unique_ptr<SegmentSource> make_source(bool cuda, bool manual_events, HostSegmentSource*& host) {
  host = nullptr;
#ifdef KILN_WITH_CUDA
  if (cuda) return std::make_unique<CudaSegmentSource>(0);
#endif
  KILN_CHECK(!cuda, "alloc_trace_replay: this build has no CUDA");
  HostSegmentSource::Options options;
  options.manual_events = manual_events;
  auto source = std::make_unique<HostSegmentSource>(options);
  host = source.get();
  return source;
}

/// One replay on a fresh allocator; with `poll`, the statistics after every event give the
/// non-releasable bytes at the moment reserved bytes peak. With `gpu_lag` > 0 the events
/// recorded up to a trace event complete `gpu_lag` trace events later.
Result replay(const std::string& path, const std::vector<bench::TraceEvent>& events, bool cuda, bool expandable,
              size_t gpu_lag, bool poll) {
  AllocatorConfig config;
  config.expandable_segments = expandable;
  HostSegmentSource* host = nullptr;
  CachingAllocator allocator(make_source(cuda, gpu_lag > 0, host), config);
  std::deque<EventId> recorded_by;  // the newest event recorded as of each of the last gpu_lag trace events
  Result r;
  r.trace = path.substr(path.find_last_of('/') + 1);
  r.config = expandable ? "expandable" : "default";
  r.events = events.size();
  std::unordered_map<int64_t, void*> live;
  const auto start = std::chrono::steady_clock::now();
  for (const bench::TraceEvent& e : events) {
    if (e.alloc) {
      live[e.id] = allocator.allocate(static_cast<size_t>(e.size), 0, "alloc_trace_replay");
    } else {
      const auto it = live.find(e.id);
      KILN_CHECK(it != live.end(), "alloc_trace_replay: {} frees block {}, which is not live", path, e.id);
      allocator.free(it->second);
      live.erase(it);
    }
    if (host != nullptr && gpu_lag > 0) {
      recorded_by.push_back(host->last_event());
      if (recorded_by.size() > gpu_lag) {
        host->complete_events_through(recorded_by.front());
        recorded_by.pop_front();
      }
    }
    if (poll) {
      const MemoryStats now = allocator.stats();
      if (now.reserved_bytes[StatPool::All].current > r.peak_reserved) {
        r.peak_reserved = now.reserved_bytes[StatPool::All].current;
        r.non_releasable_at_peak = now.inactive_split_bytes[StatPool::All].current;
      }
    }
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const MemoryStats s = allocator.stats();
  r.peak_reserved = s.reserved_bytes[StatPool::All].peak;
  r.peak_allocated = s.allocated_bytes[StatPool::All].peak;
  r.peak_non_releasable = s.inactive_split_bytes[StatPool::All].peak;
  r.end_non_releasable = s.inactive_split_bytes[StatPool::All].current;
  r.end_reserved = s.reserved_bytes[StatPool::All].current;
  r.device_allocs = s.num_device_alloc;
  r.device_frees = s.num_device_free;
  r.map_calls = s.num_map_calls;
  r.unmap_calls = s.num_unmap_calls;
  r.unmap_waits = s.num_unmap_waits;
  for (auto& [id, p] : live) allocator.free(p);
  allocator.empty_cache();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool cuda = false, json = false;
  size_t gpu_lag = 0;
  std::vector<bool> configs = {false, true};
  std::vector<std::string> traces;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      cuda = std::strcmp(argv[++i], "cuda") == 0;
    } else if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      const std::string c = argv[++i];
      configs = c == "default" ? std::vector<bool>{false} : c == "expandable" ? std::vector<bool>{true}
                                                                              : std::vector<bool>{false, true};
    } else if (std::strcmp(argv[i], "--gpu-lag") == 0 && i + 1 < argc) {
      gpu_lag = static_cast<size_t>(std::strtoull(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      traces.emplace_back(argv[i]);
    }
  }
  try {
    KILN_CHECK(gpu_lag == 0 || !cuda, "alloc_trace_replay: --gpu-lag is for the CPU device (a GPU has its own lag)");
    if (!json) {
      if (gpu_lag > 0) fmt::print("events complete {} trace events after they are recorded\n", gpu_lag);
      fmt::print("{:<24} {:<16} {:>7} {:>12} {:>12} {:>11} {:>11} {:>10} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9}\n",
                 "trace", "config", "events", "peak resv", "peak alloc", "nonrel@pk", "max nonrel", "end nonrel", "dev+",
                 "dev-", "map", "unmap", "waits", "ms");
    }
    for (const std::string& path : traces) {
      const std::vector<bench::TraceEvent> events = bench::read_trace(path);
      for (bool expandable : configs) {
        Result r = replay(path, events, cuda, expandable, gpu_lag, /*poll=*/true);
        r.ms = replay(path, events, cuda, expandable, gpu_lag, /*poll=*/false).ms;
        if (json) {
          fmt::print(
              "{{\"allocator\": \"kiln\", \"device\": \"{}\", \"trace\": \"{}\", \"config\": \"{}\", \"events\": {}, "
              "\"peak_reserved\": {}, \"peak_allocated\": {}, \"non_releasable_at_peak\": {}, "
              "\"peak_non_releasable\": {}, \"end_non_releasable\": {}, \"end_reserved\": {}, \"device_allocs\": {}, "
              "\"device_frees\": {}, \"map_calls\": {}, \"unmap_calls\": {}, \"unmap_waits\": {}, "
              "\"gpu_lag\": {}, \"ms\": {:.3f}}}\n",
              cuda ? "cuda" : "cpu", r.trace, r.config, r.events, r.peak_reserved, r.peak_allocated,
              r.non_releasable_at_peak, r.peak_non_releasable, r.end_non_releasable, r.end_reserved,
              r.device_allocs, r.device_frees, r.map_calls, r.unmap_calls, r.unmap_waits, gpu_lag, r.ms);
        } else {
          fmt::print(
              "{:<24} {:<16} {:>7} {:>12} {:>12} {:>11} {:>11} {:>10} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9.1f}\n",
              r.trace, "kiln " + r.config, r.events, r.peak_reserved, r.peak_allocated, r.non_releasable_at_peak,
              r.peak_non_releasable, r.end_non_releasable, r.device_allocs, r.device_frees, r.map_calls,
              r.unmap_calls, r.unmap_waits, r.ms);
        }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "alloc_trace_replay: {}\n", e.what());
    return 1;
  }
  return 0;
}
