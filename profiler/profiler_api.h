// The profiler's public API in one include (kiln.h includes it): Profiler, ProfileGuard,
// RecordFunction, schedules, key_averages() and its table.
#pragma once

#include "key_averages.h"
#include "profiler.h"
#include "record_function.h"
#include "schedule.h"
