// CUBLAS_CHECK: every cuBLAS / cuBLASLt call Kiln makes goes through it, so a failure becomes
// a kiln::Error naming the call, the status code and the library's text for it. cuBLASLt
// reports cublasStatus_t like cuBLAS; the names come from libcublasLt's own
// cublasLtGetStatusName/String so that linking cuBLASLt alone suffices. Only for
// translation units compiled in CUDA builds (it includes the cuBLASLt header).
#pragma once

#include <cublasLt.h>

#include "error.h"

namespace kiln::detail {
[[noreturn]] inline void throw_cublas_error(const char* call, cublasStatus_t status, const char* file, int line) {
  throw_error(file, line,
              fmt::format("cuBLAS error: {} returned {} ({}): {}", call, static_cast<int>(status),
                          cublasLtGetStatusName(status), cublasLtGetStatusString(status)));
}
}  // namespace kiln::detail

/// Evaluates a cuBLAS or cuBLASLt call and throws kiln::Error unless it returns
/// CUBLAS_STATUS_SUCCESS.
#define CUBLAS_CHECK(call)                                                          \
  do {                                                                              \
    const cublasStatus_t kiln_cublas_status_ = (call);                              \
    if (kiln_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                  \
      ::kiln::detail::throw_cublas_error(#call, kiln_cublas_status_, __FILE__, __LINE__); \
  } while (0)
