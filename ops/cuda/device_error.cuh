// The device side of device-side errors (Note [Device-side errors], core/device_error.h): a
// kernel that meets bad input calls report_device_error and carries on without reading out
// of bounds; the host raises the first report at its next synchronisation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../../core/device_error.h"

namespace kiln::cuda_kernels {

/// Records error `kind` with its three values in the device's record unless an error of the
/// current epoch was recorded already (first error wins). Any thread may call it, any
/// number of times; it costs a read of host memory, so call it only on the error path.
__device__ __forceinline__ void report_device_error(const cuda::DeviceErrorSlot& slot, uint32_t kind, int64_t a,
                                                    int64_t b, int64_t c) {
  volatile cuda::DeviceErrorReport* r = slot.report;
  const unsigned long long epoch = r->epoch;
  // Device memory, so the atomic is the device's own; a kernel that read an epoch the host
  // has already closed finds a larger claim and drops its report.
  if (atomicMax(slot.claim, epoch) >= epoch) return;
  r->kind = kind;
  r->args[0] = a;
  r->args[1] = b;
  r->args[2] = c;
  __threadfence_system();  // the values reach the host before the flag that publishes them
  r->reported = static_cast<uint32_t>(epoch);
}

}  // namespace kiln::cuda_kernels
