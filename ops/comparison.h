// Comparisons (eq, ne, lt, le, gt, ge: bool results, operands promoted first, as in
// PyTorch), where(), and the whole-tensor checks equal() and allclose().
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// a == b elementwise (bool).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
/// a != b elementwise (bool).
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Scalar& b);
/// a < b elementwise (bool).
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Scalar& b);
/// a <= b elementwise (bool).
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Scalar& b);
/// a > b elementwise (bool).
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Scalar& b);
/// a >= b elementwise (bool).
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Scalar& b);

Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);

/// cond ? a : b elementwise; cond must be bool; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// where() with number branches.
Tensor where(const Tensor& cond, const Scalar& a, const Scalar& b);

/// True when both tensors have the same shape and equal values (dtypes may differ).
bool equal(const Tensor& a, const Tensor& b);
/// True when |a - b| <= atol + rtol * |b| everywhere (shapes must broadcast); equal
/// infinities are close, an infinite difference never is; NaNs compare equal only with
/// equal_nan.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);

}  // namespace kiln
