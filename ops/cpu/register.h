// Registration hooks of the CPU kernel files, called once by register_cpu_kernels().
#pragma once

namespace kiln::cpu {

void register_factory_kernels();
void register_copy_kernels();
void register_unary_kernels();
void register_binary_kernels();
void register_reduce_kernels();
void register_softmax_kernels();
void register_gemm_kernels();
void register_fused_linear_gelu_kernels();
void register_layer_norm_kernels();
void register_dropout_kernels();
void register_loss_kernels();
void register_clamp_kernels();
void register_masked_fill_kernels();
void register_indexing_kernels();
void register_optimizer_step_kernels();

}  // namespace kiln::cpu
