// Kernel registration entry points.
#include "dispatch.h"

namespace kiln::dispatch {

void register_kernels() {
  register_cpu_kernels();
#ifdef KILN_WITH_CUDA
  register_cuda_kernels();
#endif
}

void throw_missing_kernel(const char* op, Device device) {
  KILN_FAIL("[{}] has no {} kernel (tensor on {})", op, device.is_cpu() ? "CPU" : "CUDA", device.str());
}

}  // namespace kiln::dispatch
