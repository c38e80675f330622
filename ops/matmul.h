// Matrix products: matmul (PyTorch's rules for 1-D, 2-D and batched operands with batch
// broadcasting), mm, addmm and linear. Operands must share a dtype; bool is not supported.
// GEMMs run in Eigen on the CPU and in cuBLASLt on CUDA (own kernel for integers);
// float16/bfloat16 multiply in float and round once. float32 on CUDA is true fp32 unless
// TF32 is allowed, as with PyTorch's torch.backends.cuda.matmul.allow_tf32.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// Matrix product with NumPy/PyTorch semantics:
///   [K] @ [K] -> [] (dot), [M, K] @ [K, N] -> [M, N], [K] @ [K, N] -> [N],
///   [M, K] @ [K] -> [M], [..., M, K] @ [..., K, N] -> [broadcast(...), M, N].
Tensor matmul(const Tensor& a, const Tensor& b);
/// [M, K] @ [K, N] -> [M, N] (2-D operands only).
Tensor mm(const Tensor& a, const Tensor& b);
/// beta * bias + alpha * (a @ b) for a [M, K], b [K, N], bias broadcastable to [M, N].
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
/// x @ weight^T + bias: x [..., in], weight [out, in], bias [out] (may be undefined) -> [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// Lets float32 GEMMs on CUDA use TF32 tensor cores (faster, ~10-bit mantissa); off by default. The CPU ignores it.
void set_allow_tf32(bool allow);
/// Whether float32 GEMMs on CUDA may use TF32 (set_allow_tf32).
bool allow_tf32();

}  // namespace kiln
