// A collective as the profiler and Nsight see it: an op row named "<backend>:<collective>"
// ("nccl:all_reduce") in key_averages() and the Chrome trace, opened as an op (not a user
// scope) so the kernels launched inside it (NCCL's) are tied to it by the launching thread,
// as an op's kernels are; and an NVTX range of the same name under EmitNvtx. Costs two
// relaxed atomic loads when neither is on.
#pragma once

#include "../profiler/collector.h"
#include "../profiler/nvtx.h"

namespace kiln::distributed::detail {

/// Records the enclosing scope as the collective `name` (a static string such as "nccl:all_reduce").
class CollectiveScope {
 public:
  /// Opens the row and the NVTX range where recording.
  explicit CollectiveScope(const char* name) {
    if (profiler::Collector::instance().active()) [[unlikely]]
      handle_ = profiler::Collector::instance().begin(name, profiler::EventKind::CpuOp);
    if (profiler::nvtx_enabled()) [[unlikely]] {
      profiler::nvtx_push(name);
      nvtx_ = true;
    }
  }
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
  /// Closes them.
  ~CollectiveScope() {
    if (handle_ >= 0) [[unlikely]]
      profiler::Collector::instance().end(handle_);
    if (nvtx_) [[unlikely]]
      profiler::nvtx_pop();
  }

 private:
  int64_t handle_ = -1;
  bool nvtx_ = false;
};

}  // namespace kiln::distributed::detail
