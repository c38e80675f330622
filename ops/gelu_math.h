// GELU's derivative, written once for the CPU loops and the CUDA kernels (KILN_HOST_DEVICE):
// gelu_backward(grad, x) = grad * d/dx gelu(x), exact (erf) or tanh-approximated, in the
// accumulation type A (float for 16-bit inputs). The same constants as the forward kernels.
#pragma once

#include <cmath>

#include "../core/host_device.h"

namespace kiln::math {

/// d/dx of x * Phi(x): Phi(x) + x * phi(x).
template <typename A>
KILN_HOST_DEVICE inline A gelu_derivative(A x) {
  using std::erf;
  using std::exp;
  const A kInvSqrt2 = A(0.70710678118654752440);
  const A kInvSqrt2Pi = A(0.39894228040143267794);
  const A cdf = A(0.5) * (A(1) + erf(x * kInvSqrt2));
  const A pdf = exp(A(-0.5) * x * x) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

/// d/dx of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename A>
KILN_HOST_DEVICE inline A gelu_tanh_derivative(A x) {
  using std::tanh;
  const A kBeta = A(0.79788456080286535588);
  const A kKappa = A(0.044715);
  const A x_sq = x * x;
  const A inner = kBeta * (x + kKappa * x_sq * x);
  const A t = tanh(inner);
  const A left = A(0.5) * x;
  const A left_derivative = A(0.5) * (A(1) + t);
  const A right_derivative = left * (A(1) - t * t) * kBeta * (A(1) + A(3) * kKappa * x_sq);
  return left_derivative + right_derivative;
}

}  // namespace kiln::math
