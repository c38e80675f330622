// What the op-cost tests share: the FLOPs and bytes the profiler recorded for an op.
#pragma once

#include <string>
#include <utility>

#include "profiler/profiler.h"
#include "testing.h"

namespace kiln::testing {

/// The FLOPs and bytes recorded for the first event of `p` named `name` (the test fails when none is).
inline std::pair<double, double> cost_of(const profiler::Profiler& p, const std::string& name) {
  for (const profiler::ProfileEvent& e : p.events())
    if (e.name == name) return {e.flops, e.bytes};
  FAIL("no event " << name);
  return {};
}

}  // namespace kiln::testing
