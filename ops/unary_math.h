// The unary ops' per-element formulas, written once for the CPU loops (unary_cpu.cpp) and the
// CUDA kernels (unary_cuda.cu): KILN_HOST_DEVICE functors applied to a value already widened to
// its accumulation type A (float for the 16-bit floats, the type itself otherwise). The math
// functions are called unqualified after `using std::exp;` etc., so the host compiler takes
// <cmath>'s overloads and nvcc's device pass CUDA's. The formulas match PyTorch's (exact-erf
// GELU, and its tanh form with sqrt(2/pi) and 0.044715); integers wrap (wrapping.h).
// with_unary_formula maps a UnaryOp to its functor, so both kernels list the same ops for the
// same types. The CUDA kernel's one departure, a faster GELU for 16-bit outputs, is its own.
#pragma once

#include <cmath>
#include <type_traits>

#include "../core/host_device.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::math {

/// -x; integers wrap (-INT64_MIN is INT64_MIN, as in PyTorch).
struct Neg {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    return wrapping_neg(x);
  }
};

/// |x|; integers wrap (abs(INT64_MIN) is INT64_MIN, as in PyTorch).
struct Abs {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    return x < A(0) ? wrapping_neg(x) : x;
  }
};

/// max(x, 0), written so NaN fails the test and passes through, as PyTorch's clamp_min(x, 0).
struct Relu {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    return x < A(0) ? A(0) : x;
  }
};

/// e^x.
struct Exp {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::exp;
    return exp(x);
  }
};

/// The natural logarithm.
struct Log {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::log;
    return log(x);
  }
};

/// The square root.
struct Sqrt {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::sqrt;
    return sqrt(x);
  }
};

/// 1 / sqrt(x), a correctly rounded square root and a division (not an approximate rsqrt).
struct Rsqrt {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::sqrt;
    return A(1) / sqrt(x);
  }
};

/// The hyperbolic tangent.
struct Tanh {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::tanh;
    return tanh(x);
  }
};

/// 1 / (1 + e^-x).
struct Sigmoid {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::exp;
    return A(1) / (A(1) + exp(-x));
  }
};

/// x * sigmoid(x), as x / (1 + e^-x).
struct Silu {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::exp;
    return x / (A(1) + exp(-x));
  }
};

/// The exact GELU, x * Phi(x) = x/2 (1 + erf(x / sqrt 2)).
struct Gelu {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::erf;
    const A kInvSqrt2 = A(0.70710678118654752440);
    return A(0.5) * x * (A(1) + erf(x * kInvSqrt2));
  }
};

/// GELU's tanh approximation, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x) const {
    using std::tanh;
    const A kSqrt2OverPi = A(0.79788456080286535588);
    const A kCoeff = A(0.044715);
    return A(0.5) * x * (A(1) + tanh(kSqrt2OverPi * (x + kCoeff * x * x * x)));
  }
};

/// Calls `f(formula)` with the functor of `op` and returns true, or returns false when `op`
/// has no formula for the accumulation type A (the transcendental ops on integers).
template <typename A, typename F>
bool with_unary_formula(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::Neg: return f(Neg{}), true;
    case UnaryOp::Abs: return f(Abs{}), true;
    case UnaryOp::Relu: return f(Relu{}), true;
    default: break;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case UnaryOp::Exp: return f(Exp{}), true;
      case UnaryOp::Log: return f(Log{}), true;
      case UnaryOp::Sqrt: return f(Sqrt{}), true;
      case UnaryOp::Rsqrt: return f(Rsqrt{}), true;
      case UnaryOp::Tanh: return f(Tanh{}), true;
      case UnaryOp::Sigmoid: return f(Sigmoid{}), true;
      case UnaryOp::Silu: return f(Silu{}), true;
      case UnaryOp::Gelu: return f(Gelu{}), true;
      case UnaryOp::GeluTanh: return f(GeluTanh{}), true;
      default: break;
    }
  }
  return false;
}

}  // namespace kiln::math
