// Arithmetic on two operands with broadcasting and PyTorch's type promotion: add, sub,
// mul, div (true division: integers give float32), pow, in tensor-tensor, tensor-number and
// number-tensor forms, with the usual operators.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// a + alpha * b. alpha must be an integer for integer results and a bool only for bool
/// results (where + is logical or).
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
/// a + alpha * b for a number b.
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
/// a - alpha * b. A bool operand (tensor or number) is an error, as in PyTorch: invert a
/// mask with mask == false, xor two with a != b.
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
/// a - alpha * b for a number b.
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
/// a * b.
Tensor mul(const Tensor& a, const Tensor& b);
/// a * b for a number b.
Tensor mul(const Tensor& a, const Scalar& b);
/// a / b, always true division (integer operands give float32).
Tensor div(const Tensor& a, const Tensor& b);
/// a / b for a number b.
Tensor div(const Tensor& a, const Scalar& b);
/// a ** b elementwise.
Tensor pow(const Tensor& a, const Tensor& b);
/// a ** b for a number exponent.
Tensor pow(const Tensor& a, const Scalar& b);
/// a ** b for a number base.
Tensor pow(const Scalar& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);

}  // namespace kiln
