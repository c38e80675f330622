// The shared path of every two-operand elementwise op (arithmetic and comparisons):
// validation, broadcasting, type promotion, output allocation, the op scope and the kernel
// call. Internal to ops/.
#pragma once

#include "../tensor/tensor.h"
#include "kernels.h"
#include "op_record.h"

namespace kiln::detail {

/// One operand of a binary op: a tensor or a plain number.
struct Operand {
  const Tensor* tensor = nullptr;
  Scalar number;
  Operand(const Tensor& t) : tensor(&t) {}  // NOLINT: implicit by design
  Operand(const Scalar& s) : number(s) {}   // NOLINT: implicit by design
};

/// The shared path of the binary ops: op.code is the BinaryOp.
Tensor binary_op(const OpDesc& op, const Operand& a, const Operand& b, const Scalar& alpha = 1);

}  // namespace kiln::detail
