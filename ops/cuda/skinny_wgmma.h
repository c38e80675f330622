// The sm_90a variant of the skinny GEMM (kernel: skinny_wgmma_kernel.cuh; host side:
// skinny_wgmma.cu, built for sm_90a alone like the linear+GELU kernel). Internal to the skinny
// GEMM: skinny_gemm.cu decides when it runs (skinny_gemm.h is the interface), these only say
// whether the current device can run it and enqueue it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "skinny_gemm.h"

namespace kiln::cuda_kernels {

/// Whether the current device runs the sm_90a skinny kernel: compute capability 9.0, an image
/// of the kernel with its sm_90a body in this build, cuTensorMapEncodeTiled in the driver.
/// Cached per device (so it keeps runtime queries out of a stream capture after a first call).
bool skinny_wgmma_ready();

/// Enqueues the sm_90a kernel for `args` (already accepted by skinny_gemm_accepts()) on
/// `stream`; `args.split_k` 0 picks the split. Throws kiln::Error when the device cannot run it.
void skinny_wgmma(const SkinnyGemmArgs& args, cudaStream_t stream);

}  // namespace kiln::cuda_kernels
