// The step schedule of torch.profiler.schedule(wait, warmup, active, repeat, skip_first): for
// profiling a few steps of a long loop. After skip_first steps, each cycle waits `wait` steps,
// warms up `warmup` steps (the profiler runs, its events are dropped) and records `active`
// steps, the last of which ends the cycle and hands the trace to on_trace_ready; `repeat`
// cycles (0: forever).
#pragma once

#include <cstdint>

namespace kiln::profiler {

/// torch.profiler.schedule's arguments.
struct Schedule {
  int64_t wait = 0;
  int64_t warmup = 0;
  int64_t active = 1;
  int64_t repeat = 0;      ///< cycles; 0 repeats forever
  int64_t skip_first = 0;  ///< steps before the first cycle
};

/// What the profiler does during a step (torch.profiler.ProfilerAction).
enum class ProfilerAction { None, Warmup, Record, RecordAndSave };

/// The action for step `step` (0-based) under `schedule`; throws kiln::Error when the
/// schedule has a negative field or no active step.
ProfilerAction schedule_action(const Schedule& schedule, int64_t step);

}  // namespace kiln::profiler
