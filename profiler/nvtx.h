// NVTX ranges for Nsight Systems, like torch.autograd.profiler.emit_nvtx: while an EmitNvtx
// is alive, every op pushes a range named as in the profiler's table ("kiln::addmm") and
// every RecordFunction scope one with its own name, in the NVTX domain "kiln", so nsys's
// timeline shows Kiln's op names above the kernels they launched. Independent of Profiler:
// run it under nsys without Kiln's profiler (the two would both want CUPTI).
//
//   kiln::profiler::EmitNvtx nvtx;   // e.g. for the steps `nsys profile` should show
//   train_step();
//
// With no EmitNvtx alive a RecordFunction pays one more relaxed atomic load. In builds
// without the NVTX headers (CPU-only) the ranges are not emitted; nvtx_available() says so.
#pragma once

#include <atomic>

namespace kiln::profiler {

namespace detail {
extern std::atomic<bool> g_emit_nvtx;
}

/// True while an EmitNvtx is alive.
inline bool nvtx_enabled() { return detail::g_emit_nvtx.load(std::memory_order_relaxed); }
/// True when this build emits NVTX ranges (it was built with CUDA's NVTX headers).
bool nvtx_available();
/// Opens an NVTX range named `name` on this thread (in the "kiln" domain).
void nvtx_push(const char* name);
/// Closes this thread's innermost range from nvtx_push.
void nvtx_pop();

/// Emits NVTX ranges for ops and RecordFunction scopes while alive; guards nest.
class EmitNvtx {
 public:
  /// Starts emitting (the first live guard installs the op observer).
  EmitNvtx();
  /// Stops emitting when the last live guard goes.
  ~EmitNvtx();
  EmitNvtx(const EmitNvtx&) = delete;
  EmitNvtx& operator=(const EmitNvtx&) = delete;
};

}  // namespace kiln::profiler
