// Chrome trace export: a profile's events as the JSON that Perfetto and chrome://tracing
// open, in the layout of PyTorch's traces (Kineto's): complete events ("ph": "X") for ops
// (cat cpu_op), user scopes (user_annotation), kernels (kernel), memcpys (gpu_memcpy) and
// memsets (gpu_memset); host events on the process's pid and a thread per CPU thread,
// device events on a pid per GPU and a thread per stream; a flow ("ph": "s" at the
// launching op, "f" at the kernel, cat "ac2g") per device event whose op is known; and
// process and thread name metadata. Times are microseconds since the profiler started.
#pragma once

#include <string>
#include <vector>

#include "event.h"

namespace kiln::profiler {

/// The trace document for `events` (as Profiler::events() holds them), as JSON text.
std::string chrome_trace(const std::vector<ProfileEvent>& events);
/// Writes chrome_trace(events) to `path`; throws kiln::Error when the file cannot be written.
void write_chrome_trace(const std::vector<ProfileEvent>& events, const std::string& path);

}  // namespace kiln::profiler
