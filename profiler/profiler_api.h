// The profiler's public API in one include (kiln.h includes it): Profiler, ProfileGuard,
// RecordFunction, schedules, key_averages() and its table, the Chrome trace, NVTX ranges.
#pragma once

#include "chrome_trace.h"
#include "key_averages.h"
#include "nvtx.h"
#include "profiler.h"
#include "record_function.h"
#include "schedule.h"
