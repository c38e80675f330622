// Placeholder while the sm_90a kernel is being written (issue 15): it declines every call, so
// fused_linear_gelu takes its portable path. Replaced by the kernel itself; not a result.
#include "sm90_linear_gelu.h"

namespace kiln::cuda_kernels {

bool sm90_linear_gelu_supported(const Sm90LinearGeluArgs&) { return false; }

void sm90_linear_gelu(const Sm90LinearGeluArgs&, cudaStream_t) {}

}  // namespace kiln::cuda_kernels
