// DeviceGuard: makes one GPU current for a scope and restores the caller's device after,
// so code that launches work or allocates on tensor.device() never leaves the thread's
// current device changed. CUDA builds only (it includes the CUDA runtime header).
#pragma once

#include "cuda_check.h"
#include "device.h"

namespace kiln::cuda {

/// Sets the current device to `device` for the scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    // With one visible GPU, device 0 is the only device a thread can have current: nothing
    // to ask or change (this runs before every kernel launch).
    if (device == 0 && device_count() == 1) return;
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) {
      CUDA_CHECK(cudaSetDevice(device));
      changed_ = true;
    }
  }
  /// Restores the caller's device if this guard changed it (nothing to ask the runtime
  /// otherwise: one cudaGetDevice per guard on the common path).
  ~DeviceGuard() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace kiln::cuda
