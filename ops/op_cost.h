// The cost functions op records point to (OpDesc::cost): floating-point operations and the
// bytes an ideal kernel moves (every input read once, every output written once).
//
// FLOPs follow PyTorch's convention for matrix products (2 per multiply-add: 2*M*N*K for
// mm / matmul / addmm, per batch for batched matmul; a bias add is not counted). Beyond
// PyTorch, which counts only those, every elementwise op counts 1 per output element, a
// reduction 1 per input element, softmax / log_softmax 5 per element (max, subtract, exp,
// sum, divide or log) and layer_norm 8 per element: nominal counts, to tell compute-bound
// ops from memory-bound ones, not instruction counts. linear counts nothing itself: its
// addmm (or matmul) child carries the work, so it is never counted twice. fused_linear_gelu
// counts its GEMM plus 1 per output element (the epilogue); its backward op its GEMMs, dH and
// the bias gradient's additions. Views count
// nothing; copies and factories count bytes only (an op record without a cost function).
//
// The FLOPs' arithmetic (OpCost::math, set whenever flops > 0) is the dtype of the op's first
// floating input: float64, float32, or Half for float16 and bfloat16; a float32 GEMM on CUDA
// while allow_tf32() is TF32 (the CPU ignores allow_tf32). Ops with no floating input
// (integer add, ...) keep their nominal count but MathKind::None: no FLOP ceiling fits.
#pragma once

#include "op_record.h"

namespace kiln {

/// The cost of a recorded call: its record's cost function, or bytes only when it has none.
OpCost op_cost(const OpCall& call);

namespace cost {
/// Bytes only: every defined input read once, every output written once.
OpCost bytes_only(const OpCall& call);
/// Nothing at all (views; linear, whose child op carries the work).
OpCost none(const OpCall& call);
/// 1 FLOP per output element.
OpCost elementwise(const OpCall& call);
/// 1 FLOP per element of the first input.
OpCost reduction(const OpCall& call);
/// 5 FLOPs per output element.
OpCost softmax(const OpCall& call);
/// 8 FLOPs per output element.
OpCost layer_norm(const OpCall& call);
/// 2 * out elements * K, K the last dim of the first matrix (input slot 0).
OpCost gemm(const OpCall& call);
/// As gemm, with the first matrix at input slot 1 (addmm(bias, mat1, mat2)).
OpCost addmm(const OpCall& call);
/// fused_linear_gelu: the GEMM's 2 * out elements * K (K the last dim of input slot 0) plus 1
/// per output element for the bias and GELU epilogue.
OpCost linear_gelu(const OpCall& call);
/// fused_linear_gelu_backward: 1 FLOP per element of dH (grad_output's), 2 * M * N * K for each
/// gradient GEMM it ran (grad input, grad weight: outputs 0 and 1 defined), M * N for the bias
/// gradient (output 2 defined); M * N is grad_output's element count, K input slot 1's last dim.
OpCost linear_gelu_backward(const OpCall& call);
/// 1 FLOP per element of the index (input slot 1): scatter_add's additions.
OpCost scatter_add(const OpCall& call);
}  // namespace cost

}  // namespace kiln
