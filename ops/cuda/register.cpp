// Fills the CUDA column of the kernel tables (CUDA builds only). Families without an entry
// here answer "[op] has no CUDA kernel".
#include "register.h"

#include "../dispatch.h"

namespace kiln::dispatch {

void register_cuda_kernels() {
  cuda_kernels::register_factory_kernels();
  cuda_kernels::register_copy_kernels();
  cuda_kernels::register_unary_kernels();
  cuda_kernels::register_binary_kernels();
  cuda_kernels::register_reduce_kernels();
  cuda_kernels::register_softmax_kernels();
  cuda_kernels::register_layer_norm_kernels();
  cuda_kernels::register_loss_kernels();
  cuda_kernels::register_cross_entropy_kernels();
  cuda_kernels::register_loss_backward_kernels();
  cuda_kernels::register_dropout_kernels();
  cuda_kernels::register_matmul_kernels();
  cuda_kernels::register_fused_linear_gelu_kernels();
  cuda_kernels::register_clamp_kernels();
  cuda_kernels::register_masked_fill_kernels();
  cuda_kernels::register_indexing_kernels();
  cuda_kernels::register_optimizer_step_kernels();
}

}  // namespace kiln::dispatch
