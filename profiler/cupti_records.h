// CUPTI's activity records as ProfileEvents: the kernel, memcpy and memset records the device
// tracer (cupti_tracer.cpp) collects, converted one by one, and kernel names demangled as
// PyTorch shows them. Apart from the tracer so that the tracer holds CUPTI's set-up and
// teardown only. CUDA builds only (it includes cupti.h).
#pragma once

#include <cupti.h>

#include <optional>
#include <string>

#include "event.h"

namespace kiln::profiler {

/// A kernel, memcpy or memset record as a ProfileEvent (times still on CUPTI's clock, kernel
/// names still mangled, a kernel's queued time in launch_ns); nullopt for the other kinds.
std::optional<ProfileEvent> event_of(const CUpti_Activity* record);

/// A kernel name as PyTorch shows it: demangled when it is a C++ symbol (cuBLAS's
/// "sm90_xmma_gemm_..." are not, and stay as they are).
std::string demangle(const std::string& name);

}  // namespace kiln::profiler
