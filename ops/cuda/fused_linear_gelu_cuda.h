// The cuBLASLt DGELU_BGRAD epilogue, for a compiled training step (CUDA builds only). In
// a tanh-GELU layer y = gelu(h), h = x W^T + b, followed by a linear layer z = y V^T + c,
// the gradient that reaches the GELU is grad_y = grad_z @ V, the next layer's grad-input GEMM.
// That GEMM can apply gelu'(h) and sum the bias gradient in its epilogue, producing dH and
// db at once; fused_linear_gelu_backward cannot, because the GEMM belongs to the next
// layer's op. Kiln's eager backward does not call this; graph/ may, where it sees both.
#pragma once

#include "../../tensor/tensor.h"

namespace kiln::cuda_kernels {

/// grad_pre [M, N] = (grad_next [M, P] @ weight_next [P, N]) * gelu_tanh'(pre [M, N]) and
/// grad_bias [N] = grad_pre summed over its rows, in one cuBLASLt GEMM (DGELU_BGRAD). grad_pre,
/// pre and grad_bias are contiguous; grad_next and weight_next any BLAS-readable layout; one
/// dtype (float32, float16, bfloat16), one CUDA device. Returns false, launching nothing,
/// where cuBLASLt declines (N not a multiple of 8, an unsupported dtype or layout): compute
/// it as mm, then gelu_backward and a column sum. The derivative is cuBLASLt's, whose tanh
/// accuracy is not documented: meant for 16-bit and TF32 training, not true-fp32 results.
bool linear_dgelu_bgrad_cuda(const Tensor& grad_pre, const Tensor& grad_bias, const Tensor& grad_next,
                             const Tensor& weight_next, const Tensor& pre);

}  // namespace kiln::cuda_kernels
