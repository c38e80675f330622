// The work an op call does, for the profiler's with_flops columns: floating-point
// operations and the bytes an ideal kernel moves (every input read once, every output
// written once), from the op's name and its input and output tensors.
//
// FLOPs follow PyTorch's convention for matrix products (2 per multiply-add: 2*M*N*K for
// mm / matmul / addmm, per batch for batched matmul; a bias add is not counted). Beyond
// PyTorch, which counts only those, every elementwise op counts 1 per output element, a
// reduction 1 per input element, softmax / log_softmax 5 per element (max, subtract, exp,
// sum, divide or log) and layer_norm 8 per element: nominal counts, to tell compute-bound
// ops from memory-bound ones, not instruction counts. linear counts nothing itself: its
// addmm (or matmul) child carries the work, so it is never counted twice. Views, copies and
// factories count bytes only (views none).
//
// The FLOPs' arithmetic (OpCost::math, set whenever flops > 0) is the dtype of the op's first
// floating input: float64, float32, or Half for float16 and bfloat16; a float32 mm / matmul /
// addmm on CUDA while allow_tf32() is TF32 (the CPU ignores allow_tf32). Ops with no floating
// input (integer add, ...) keep their nominal count but MathKind::None: no FLOP ceiling fits.
#pragma once

#include <span>

#include "../tensor/tensor.h"
#include "event.h"

namespace kiln::profiler {

/// FLOPs and ideal bytes moved by one op call.
struct OpCost {
  double flops = 0;
  double bytes = 0;
  MathKind math = MathKind::None;  ///< the arithmetic the FLOPs run in (None when there are none)
};

/// The cost of op `name` ("add", "addmm", ...) given its inputs and outputs.
OpCost op_cost(const char* name, std::span<const Tensor* const> inputs, std::span<const Tensor> outputs);

}  // namespace kiln::profiler
