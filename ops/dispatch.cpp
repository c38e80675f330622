// Kernel registration entry points.
#include "dispatch.h"

namespace kiln::dispatch {

void register_kernels() {
  register_cpu_kernels();
  // The CUDA backend adds register_cuda_kernels() here.
}

void throw_missing_kernel(const char* op, Device device) {
  KILN_FAIL("[{}] has no {} kernel (tensor on {})", op, device.is_cpu() ? "CPU" : "CUDA", device.str());
}

}  // namespace kiln::dispatch
