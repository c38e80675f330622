// Elementwise functions of one tensor. Integer inputs to the transcendental functions
// (exp, log, sqrt, rsqrt, tanh, sigmoid) give float32, as in PyTorch; neg, abs and relu keep
// the dtype; gelu and silu need a floating input.
#pragma once

#include <string_view>

#include "../tensor/tensor.h"

namespace kiln {

/// -x.
Tensor neg(const Tensor& x);
/// e^x.
Tensor exp(const Tensor& x);
/// Natural logarithm (NaN below 0, -inf at 0).
Tensor log(const Tensor& x);
/// Square root (NaN below 0).
Tensor sqrt(const Tensor& x);
/// 1 / sqrt(x).
Tensor rsqrt(const Tensor& x);
/// |x|.
Tensor abs(const Tensor& x);
/// Hyperbolic tangent.
Tensor tanh(const Tensor& x);
/// 1 / (1 + e^-x).
Tensor sigmoid(const Tensor& x);
/// max(x, 0).
Tensor relu(const Tensor& x);
/// GELU: x * Phi(x) with the exact erf ("none", the default) or PyTorch's tanh
/// approximation ("tanh").
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
/// grad * gelu'(x): GELU's backward ("none" or "tanh", as the forward), same shapes, floating.
Tensor gelu_backward(const Tensor& grad, const Tensor& x, std::string_view approximate = "none");
/// SiLU (swish): x * sigmoid(x).
Tensor silu(const Tensor& x);

/// -x.
Tensor operator-(const Tensor& x);

}  // namespace kiln
