// The CUDA suites' check that a recording was traced by CUPTI. Under another CUDA tool that
// holds CUPTI (the GPU check runs the suite under compute-sanitizer with
// KILN_TEST_CUPTI_TAKEN=1) the profiler must say so and fall back to CPU columns; anywhere
// else it must trace.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "profiler/profiler.h"

namespace kiln::testing {

/// True when CUPTI traced `prof`'s recording; false, after checking the CPU-columns fallback,
/// when KILN_TEST_CUPTI_TAKEN says another tool holds CUPTI.
inline bool traced(const profiler::Profiler& prof) {
  const std::string& status = prof.device_activity_status();
  if (status.empty()) return true;
  INFO(status);
  REQUIRE(std::getenv("KILN_TEST_CUPTI_TAKEN") != nullptr);
  CHECK(status.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED") != std::string::npos);
  CHECK(status.find("CPU columns only") != std::string::npos);
  for (const profiler::ProfileEvent& e : prof.events()) CHECK_FALSE(profiler::on_device(e.kind));
  MESSAGE("another CUDA tool holds CUPTI; the profiler recorded CPU columns only: " << status);
  return false;
}

}  // namespace kiln::testing
