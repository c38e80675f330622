// DeviceGuard: makes one GPU current for a scope and restores the caller's device after,
// so code that launches work or allocates on tensor.device() never leaves the thread's
// current device changed. CUDA builds only (it includes the CUDA runtime header).
#pragma once

#include "cuda_check.h"

namespace kiln::cuda {

/// Sets the current device to `device` for the scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace kiln::cuda
