// Building blocks for ops: a fresh contiguous tensor and a view with a given layout, made
// without opening an op scope. Public factories (ops/factory.h) and views (ops/views.cpp)
// are built on these; kernels' outputs are made with them.
#pragma once

#include "shape.h"
#include "tensor.h"

namespace kiln {

/// A contiguous tensor with uninitialised memory; `op` names the caller in errors (negative
/// sizes, or an element count, byte size or stride that overflows int64).
Tensor new_contiguous(const Shape& sizes, DType dtype, Device device, const char* op);

/// A view of `base`'s storage with the given layout (no bounds check: callers guarantee it);
/// `op` names the caller when the sizes' element count overflows int64.
Tensor new_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset, const char* op = "view");

/// `t` broadcast to `target` as a stride-0 view (target must be a broadcast of t's shape).
Tensor broadcast_view(const Tensor& t, const Shape& target);

}  // namespace kiln
