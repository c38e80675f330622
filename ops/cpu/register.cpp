// Fills the CPU column of every kernel table.
#include "register.h"

#include "../dispatch.h"

namespace kiln::dispatch {

void register_cpu_kernels() {
  cpu::register_factory_kernels();
  cpu::register_copy_kernels();
  cpu::register_unary_kernels();
  cpu::register_binary_kernels();
  cpu::register_reduce_kernels();
  cpu::register_softmax_kernels();
  cpu::register_gemm_kernels();
  cpu::register_fused_linear_gelu_kernels();
  cpu::register_layer_norm_kernels();
  cpu::register_dropout_kernels();
  cpu::register_loss_kernels();
  cpu::register_clamp_kernels();
  cpu::register_masked_fill_kernels();
  cpu::register_indexing_kernels();
  cpu::register_optimizer_step_kernels();
}

}  // namespace kiln::dispatch
