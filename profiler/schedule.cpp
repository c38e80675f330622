// schedule_action(): torch.profiler.schedule's state machine as a pure function of the step.
#include "schedule.h"

#include "../core/error.h"

namespace kiln::profiler {

ProfilerAction schedule_action(const Schedule& s, int64_t step) {
  KILN_CHECK(s.wait >= 0 && s.warmup >= 0 && s.repeat >= 0 && s.skip_first >= 0,
             "schedule: wait, warmup, repeat and skip_first must be non-negative (got {}, {}, {}, {})", s.wait,
             s.warmup, s.repeat, s.skip_first);
  KILN_CHECK(s.active > 0, "schedule: active must be at least 1 (got {})", s.active);
  KILN_CHECK(step >= 0, "schedule: step {} is negative", step);
  if (step < s.skip_first) return ProfilerAction::None;
  step -= s.skip_first;
  const int64_t cycle = s.wait + s.warmup + s.active;
  if (s.repeat > 0 && step / cycle >= s.repeat) return ProfilerAction::None;
  const int64_t at = step % cycle;
  if (at < s.wait) return ProfilerAction::None;
  if (at < s.wait + s.warmup) return ProfilerAction::Warmup;
  return at < cycle - 1 ? ProfilerAction::Record : ProfilerAction::RecordAndSave;
}

}  // namespace kiln::profiler
