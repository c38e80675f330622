// Device naming and the CUDA presence queries. The queries talk to the CUDA runtime only in
// builds with CUDA (KILN_WITH_CUDA); a CPU-only build answers "no GPU" without linking it.
#include "device.h"

#include "error.h"

#ifdef KILN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kiln {

Device Device::cuda(int index) {
  KILN_CHECK(index >= 0 && index < 32768, "Device::cuda: device index must be in [0, 32767], got {}",
             index);
  return Device(DeviceType::CUDA, index);
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index_);
}

namespace cuda {

bool is_built() {
#ifdef KILN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int device_count() {
#ifdef KILN_WITH_CUDA
  // Asked once: the answer cannot change within a process, and a machine without a driver
  // answers with an error code, which means "no GPU" here.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky error so later calls start clean
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

bool is_available() { return device_count() > 0; }

}  // namespace cuda
}  // namespace kiln
