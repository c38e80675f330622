// Replays allocation traces through Kiln's caching allocator and reports its peak reserved
// bytes and peak non-releasable (inactive split) bytes, the figures compared with PyTorch's
// allocator replaying the same trace (bench/alloc_trace_replay.py).
//
//   alloc_trace_replay [--device cpu|cuda] TRACE...
#include <kiln/kiln.h>

#include <cstring>
#include <unordered_map>

#include "bench/alloc_trace.h"

using namespace kiln;

int main(int argc, char** argv) {
  Device device = Device::cpu();
  std::vector<std::string> traces;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = std::strcmp(argv[++i], "cuda") == 0 ? Device::cuda(0) : Device::cpu();
    } else {
      traces.emplace_back(argv[i]);
    }
  }
  try {
    CachingAllocator& allocator = caching_allocator(device, "alloc_trace_replay");
    fmt::print("{:<22} {:>8} {:>16} {:>22} {:>10}\n", "trace", "events", "peak reserved", "peak non-releasable",
               "device allocs");
    for (const std::string& path : traces) {
      const std::vector<bench::TraceEvent> events = bench::read_trace(path);
      allocator.empty_cache();
      allocator.reset_peak_stats();
      allocator.reset_accumulated_stats();
      std::unordered_map<int64_t, void*> live;
      for (const bench::TraceEvent& e : events) {
        if (e.alloc) {
          live[e.id] = allocator.allocate(static_cast<size_t>(e.size), 0, "alloc_trace_replay");
        } else {
          allocator.free(live.at(e.id));
          live.erase(e.id);
        }
      }
      const MemoryStats s = allocator.stats();
      std::string name = path.substr(path.find_last_of('/') + 1);
      fmt::print("{:<22} {:>8} {:>16} {:>22} {:>10}\n", name, events.size(),
                 s.reserved_bytes[StatPool::All].peak, s.inactive_split_bytes[StatPool::All].peak,
                 s.num_device_alloc);
      for (auto& [id, p] : live) allocator.free(p);
    }
    allocator.empty_cache();
  } catch (const std::exception& e) {
    fmt::print(stderr, "alloc_trace_replay: {}\n", e.what());
    return 1;
  }
  return 0;
}
