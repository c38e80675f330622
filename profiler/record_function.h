// RecordFunction: a named scope in the profile, like torch.profiler.record_function. Usable
// anywhere (any thread, any layer above profiler/); with no profiler recording and no
// EmitNvtx alive it costs two relaxed atomic loads. Under EmitNvtx it is also an NVTX range.
//
//   {
//     kiln::profiler::RecordFunction scope("linear_forward");
//     y = model.forward(x);
//   }
#pragma once

#include <cstdint>
#include <string>

#include "collector.h"
#include "nvtx.h"

namespace kiln::profiler {

/// Records the enclosing C++ scope as a user event named `name`.
class RecordFunction {
 public:
  /// Opens the scope (recorded only while a profiler records).
  explicit RecordFunction(const char* name) {
    if (Collector::instance().active()) [[unlikely]]
      handle_ = Collector::instance().begin(name, EventKind::UserScope);
    if (nvtx_enabled()) [[unlikely]] {
      nvtx_push(name);
      nvtx_ = true;
    }
  }
  /// Opens the scope with a computed name.
  explicit RecordFunction(const std::string& name) : RecordFunction(name.c_str()) {}
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;
  /// Closes the scope.
  ~RecordFunction() {
    if (handle_ >= 0) [[unlikely]]
      Collector::instance().end(handle_);
    if (nvtx_) [[unlikely]]
      nvtx_pop();
  }

 private:
  int64_t handle_ = -1;
  bool nvtx_ = false;
};

}  // namespace kiln::profiler
