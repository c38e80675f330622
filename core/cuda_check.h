// CUDA_CHECK: every CUDA runtime call Kiln makes goes through it, so a failure becomes a
// kiln::Error naming the call, the error code and the runtime's text for it. Only for
// translation units compiled in CUDA builds (it includes the CUDA runtime header).
#pragma once

#include <cuda_runtime_api.h>

#include "error.h"

namespace kiln::detail {
[[noreturn]] inline void throw_cuda_error(const char* call, cudaError_t status, const char* file, int line) {
  throw_error(file, line,
              fmt::format("CUDA error: {} returned {} ({}): {}", call, static_cast<int>(status), cudaGetErrorName(status),
                          cudaGetErrorString(status)));
}
}  // namespace kiln::detail

namespace kiln::cuda {
/// For query calls (cudaEventQuery, cudaStreamQuery): true when done, false when the work
/// is still running (clearing that status), and an Error for any other status.
inline bool ready(cudaError_t status, const char* call) {
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  if (status != cudaSuccess) ::kiln::detail::throw_cuda_error(call, status, __FILE__, __LINE__);
  return true;
}
}  // namespace kiln::cuda

/// Evaluates a CUDA runtime call and throws kiln::Error unless it returns cudaSuccess.
#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    const cudaError_t kiln_cuda_status_ = (call);                              \
    if (kiln_cuda_status_ != cudaSuccess) [[unlikely]]                          \
      ::kiln::detail::throw_cuda_error(#call, kiln_cuda_status_, __FILE__, __LINE__); \
  } while (0)
