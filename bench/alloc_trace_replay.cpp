// Replays allocation traces through Kiln's caching allocator, with classic segments and with
// expandable segments, and reports per trace what the comparison with PyTorch's allocator
// (bench/alloc_trace_replay.py, the same traces) needs: peak reserved and peak allocated
// bytes, non-releasable (inactive split) bytes at the moment of peak reserved, at their own
// peak and at the end, the device calls (segments or pages created and released, pages mapped
// and unmapped) and the replay time (of a run of its own: the figures come from a second run
// that reads the statistics after every event).
//
//   alloc_trace_replay [--device cpu|cuda] [--config default|expandable|both] [--json] TRACE...
//
// Each (trace, config) runs on an allocator of its own, so nothing cached by one run serves
// the next. On the CPU the host source's 2 MiB pages stand in for the GPU's, so the figures
// predict the GPU's except for the replay time. --json prints one JSON object per line
// (bench/alloc_trace_compare.py reads them).
#include <kiln/kiln.h>

#include <chrono>
#include <cstring>
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
  int64_t device_allocs = 0, device_frees = 0, map_calls = 0, unmap_calls = 0;
  double ms = 0;
};

std::unique_ptr<SegmentSource> make_source(bool cuda) {
#ifdef KILN_WITH_CUDA
  if (cuda) return std::make_unique<CudaSegmentSource>(0);
#endif
  KILN_CHECK(!cuda, "alloc_trace_replay: this build has no CUDA");
  return std::make_unique<HostSegmentSource>();
}

/// One replay on a fresh allocator; with `poll`, the statistics after every event give the
/// non-releasable bytes at the moment reserved bytes peak.
Result replay(const std::string& path, const std::vector<bench::TraceEvent>& events, bool cuda, bool expandable,
              bool poll) {
  AllocatorConfig config;
  config.expandable_segments = expandable;
  CachingAllocator allocator(make_source(cuda), config);
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
  for (auto& [id, p] : live) allocator.free(p);
  allocator.empty_cache();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool cuda = false, json = false;
  std::vector<bool> configs = {false, true};
  std::vector<std::string> traces;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      cuda = std::strcmp(argv[++i], "cuda") == 0;
    } else if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      const std::string c = argv[++i];
      configs = c == "default" ? std::vector<bool>{false} : c == "expandable" ? std::vector<bool>{true}
                                                                              : std::vector<bool>{false, true};
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      traces.emplace_back(argv[i]);
    }
  }
  try {
    if (!json)
      fmt::print("{:<24} {:<16} {:>7} {:>12} {:>12} {:>11} {:>11} {:>10} {:>6} {:>6} {:>6} {:>6} {:>9}\n", "trace",
                 "config", "events", "peak resv", "peak alloc", "nonrel@pk", "max nonrel", "end nonrel", "dev+", "dev-",
                 "map", "unmap", "ms");
    for (const std::string& path : traces) {
      const std::vector<bench::TraceEvent> events = bench::read_trace(path);
      for (bool expandable : configs) {
        Result r = replay(path, events, cuda, expandable, /*poll=*/true);
        r.ms = replay(path, events, cuda, expandable, /*poll=*/false).ms;
        if (json) {
          fmt::print(
              "{{\"allocator\": \"kiln\", \"device\": \"{}\", \"trace\": \"{}\", \"config\": \"{}\", \"events\": {}, "
              "\"peak_reserved\": {}, \"peak_allocated\": {}, \"non_releasable_at_peak\": {}, "
              "\"peak_non_releasable\": {}, \"end_non_releasable\": {}, \"end_reserved\": {}, \"device_allocs\": {}, "
              "\"device_frees\": {}, \"map_calls\": {}, \"unmap_calls\": {}, \"ms\": {:.3f}}}\n",
              cuda ? "cuda" : "cpu", r.trace, r.config, r.events, r.peak_reserved, r.peak_allocated,
              r.non_releasable_at_peak, r.peak_non_releasable, r.end_non_releasable, r.end_reserved,
              r.device_allocs, r.device_frees, r.map_calls, r.unmap_calls, r.ms);
        } else {
          fmt::print("{:<24} {:<16} {:>7} {:>12} {:>12} {:>11} {:>11} {:>10} {:>6} {:>6} {:>6} {:>6} {:>9.1f}\n",
                     r.trace, "kiln " + r.config, r.events, r.peak_reserved, r.peak_allocated,
                     r.non_releasable_at_peak, r.peak_non_releasable, r.end_non_releasable, r.device_allocs,
                     r.device_frees, r.map_calls, r.unmap_calls, r.ms);
        }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "alloc_trace_replay: {}\n", e.what());
    return 1;
  }
  return 0;
}
