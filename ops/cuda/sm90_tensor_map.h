// cuTensorMapEncodeTiled, the driver function that builds TMA tensor maps, for Kiln's sm_90a
// kernels (the linear+GELU kernel, the wgmma skinny GEMM). It is looked up through the
// runtime (cudaGetDriverEntryPointByVersion), as the allocator does, so libkiln never links
// libcuda; the lookup runs once per process.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace kiln::cuda_kernels::sm90 {

/// cuTensorMapEncodeTiled from the driver, or null when the driver does not have it.
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t status =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    if (status != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace kiln::cuda_kernels::sm90
