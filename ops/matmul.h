// Matrix products: matmul (PyTorch's rules for 1-D, 2-D and batched operands with batch
// broadcasting), mm, addmm and linear. Operands must share a dtype; bool is not supported.
// GEMMs run in Eigen on the CPU; float16/bfloat16 multiply in float and round once.
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

}  // namespace kiln
