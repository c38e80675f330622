// Synthetic profiler data for the CPU tests: events and key_averages rows made by hand, so
// aggregation, tables and traces are checked against known values without a profiler.
#pragma once

#include <string>
#include <utility>

#include "profiler/event.h"
#include "profiler/key_averages.h"

namespace kiln::profiler::testing {

/// A host event (an op unless `kind` says otherwise) from `start` to `end` ns under `parent`.
inline ProfileEvent host(std::string name, int64_t start, int64_t end, int64_t parent,
                         EventKind kind = EventKind::CpuOp) {
  ProfileEvent e;
  e.name = std::move(name);
  e.kind = kind;
  e.start_ns = start;
  e.end_ns = end;
  e.parent = parent;
  return e;
}

/// A kernel on device 0 from `start` to `end` ns, launched by event `launcher`.
inline ProfileEvent kernel(std::string name, int64_t start, int64_t end, int64_t launcher) {
  ProfileEvent e;
  e.name = std::move(name);
  e.kind = EventKind::Kernel;
  e.start_ns = start;
  e.end_ns = end;
  e.launcher = launcher;
  e.device = 0;
  return e;
}

/// A key_averages row of one call with the given self and total times (ns).
inline EventAverage row(std::string key, EventKind kind, int64_t self_cpu, int64_t cpu, int64_t self_cuda,
                        int64_t cuda) {
  EventAverage r;
  r.key = std::move(key);
  r.kind = kind;
  r.count = 1;
  r.self_cpu_time_total_ns = self_cpu;
  r.cpu_time_total_ns = cpu;
  r.self_cuda_time_total_ns = self_cuda;
  r.cuda_time_total_ns = cuda;
  return r;
}

}  // namespace kiln::profiler::testing
