// The binary ops' per-element formulas, written once for the CPU loops (binary_cpu.cpp) and
// the CUDA kernels (binary_cuda.cu): KILN_HOST_DEVICE functors of two values already widened
// to their accumulation type A (float for the 16-bit floats, the type itself otherwise).
// Arithmetic returns A, the comparisons bool. Integer arithmetic wraps (wrapping.h) and
// integer pow squares exactly (int_pow.h), as PyTorch's do; math functions are called
// unqualified after `using std::pow;`, so each compiler takes its own overload.
// with_binary_formula maps a BinaryOp to its functor, so both kernels list the same ops for
// the same types.
#pragma once

#include <cmath>
#include <type_traits>
#include <utility>

#include "../core/host_device.h"
#include "gelu_math.h"
#include "int_pow.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::math {

/// x + alpha * y (add's alpha form; alpha 1 gives x + y bit for bit, 1 * y being exact).
template <typename A>
struct Add {
  A alpha;
  KILN_HOST_DEVICE A operator()(A x, A y) const { return wrapping_add(x, wrapping_mul(alpha, y)); }
};

/// x - alpha * y.
template <typename A>
struct Sub {
  A alpha;
  KILN_HOST_DEVICE A operator()(A x, A y) const { return wrapping_sub(x, wrapping_mul(alpha, y)); }
};

/// x * y.
struct Mul {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x, A y) const {
    return wrapping_mul(x, y);
  }
};

/// x / y (floating types only: div promotes integer operands to float32).
struct Div {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x, A y) const {
    return x / y;
  }
};

/// x ** y: the math library's pow for floats, exact wrapping repeated squaring for integers.
struct Pow {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A x, A y) const {
    if constexpr (std::is_floating_point_v<A>) {
      using std::pow;
      return pow(x, y);
    } else {
      return int_pow<A>(x, y);
    }
  }
};

/// grad * gelu'(x), the exact GELU's derivative (gelu_math.h).
struct GeluBackward {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A grad, A x) const {
    return grad * gelu_derivative(x);
  }
};

/// grad * gelu'(x) for GELU's tanh approximation.
struct GeluTanhBackward {
  template <typename A>
  KILN_HOST_DEVICE A operator()(A grad, A x) const {
    return grad * gelu_tanh_derivative(x);
  }
};

/// x == y (false when either is NaN).
struct Eq {
  template <typename A>
  KILN_HOST_DEVICE bool operator()(A x, A y) const {
    return x == y;
  }
};

/// x != y (true when either is NaN).
struct Ne {
  template <typename A>
  KILN_HOST_DEVICE bool operator()(A x, A y) const {
    return x != y;
  }
};

/// x < y.
struct Lt {
  template <typename A>
  KILN_HOST_DEVICE bool operator()(A x, A y) const {
    return x < y;
  }
};

/// x <= y.
struct Le {
  template <typename A>
  KILN_HOST_DEVICE bool operator()(A x, A y) const {
    return x <= y;
  }
};

/// x > y.
struct Gt {
  template <typename A>
  KILN_HOST_DEVICE bool operator()(A x, A y) const {
    return x > y;
  }
};

/// x >= y.
struct Ge {
  template <typename A>
  KILN_HOST_DEVICE bool operator()(A x, A y) const {
    return x >= y;
  }
};

/// Calls `f(formula)` with the functor of `op` (Add and Sub carrying `alpha`) and returns
/// true, or returns false when `op` has no formula for the accumulation type A: Div and the
/// GELU derivatives are for floating types, Pow for every type but bool.
template <typename A, typename F>
bool with_binary_formula(BinaryOp op, A alpha, F&& f) {
  switch (op) {
    case BinaryOp::Add: return f(Add<A>{alpha}), true;
    case BinaryOp::Sub: return f(Sub<A>{alpha}), true;
    case BinaryOp::Mul: return f(Mul{}), true;
    case BinaryOp::Eq: return f(Eq{}), true;
    case BinaryOp::Ne: return f(Ne{}), true;
    case BinaryOp::Lt: return f(Lt{}), true;
    case BinaryOp::Le: return f(Le{}), true;
    case BinaryOp::Gt: return f(Gt{}), true;
    case BinaryOp::Ge: return f(Ge{}), true;
    default: break;
  }
  if constexpr (!std::is_same_v<A, bool>) {
    if (op == BinaryOp::Pow) return f(Pow{}), true;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case BinaryOp::Div: return f(Div{}), true;
      case BinaryOp::GeluBackward: return f(GeluBackward{}), true;
      case BinaryOp::GeluTanhBackward: return f(GeluTanhBackward{}), true;
      default: break;
    }
  }
  return false;
}

/// The element type a kernel writes for formula F on elements of type T: bool for the
/// comparisons, T for arithmetic.
template <typename F, typename A, typename T>
using binary_out_t = std::conditional_t<std::is_same_v<decltype(std::declval<F>()(A{}, A{})), bool>, bool, T>;

}  // namespace kiln::math
