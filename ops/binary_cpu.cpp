// CPU bodies of the binary ops (arithmetic and comparisons). 16-bit floats compute in
// float; integer pow uses exact repeated squaring. Integer arithmetic wraps (wrapping.h),
// as PyTorch's does, instead of overflowing into undefined behaviour.
#include <cmath>
#include <type_traits>

#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "gelu_math.h"
#include "int_pow.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cpu {

namespace {

template <typename T, typename F>
void arith(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  using A = acc_t<T>;
  map<T, T, T>(out, [f](T x, T y) { return static_cast<T>(f(static_cast<A>(x), static_cast<A>(y))); }, a, b);
}

template <typename T, typename F>
void compare(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  using A = acc_t<T>;
  map<bool, T, T>(out, [f](T x, T y) { return f(static_cast<A>(x), static_cast<A>(y)); }, a, b);
}

template <typename T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  using A = acc_t<T>;
  const A al = alpha.to<A>();
  const bool unit_alpha = alpha.to_double() == 1.0;
  switch (op) {
    case BinaryOp::Add:
      if (unit_alpha) return arith<T>(out, a, b, [](A x, A y) { return wrapping_add(x, y); });
      return arith<T>(out, a, b, [al](A x, A y) { return wrapping_add(x, wrapping_mul(al, y)); });
    case BinaryOp::Sub:
      if (unit_alpha) return arith<T>(out, a, b, [](A x, A y) { return wrapping_sub(x, y); });
      return arith<T>(out, a, b, [al](A x, A y) { return wrapping_sub(x, wrapping_mul(al, y)); });
    case BinaryOp::Mul: return arith<T>(out, a, b, [](A x, A y) { return wrapping_mul(x, y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<A>) return arith<T>(out, a, b, [](A x, A y) { return x / y; });
      break;
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<A>) return arith<T>(out, a, b, [](A x, A y) { return std::pow(x, y); });
      else if constexpr (!std::is_same_v<T, bool>) return arith<T>(out, a, b, [](A x, A y) { return int_pow<A>(x, y); });
      break;
    case BinaryOp::GeluBackward:
      if constexpr (std::is_floating_point_v<A>)
        return arith<T>(out, a, b, [](A g, A x) { return g * math::gelu_derivative(x); });
      break;
    case BinaryOp::GeluTanhBackward:
      if constexpr (std::is_floating_point_v<A>)
        return arith<T>(out, a, b, [](A g, A x) { return g * math::gelu_tanh_derivative(x); });
      break;
    case BinaryOp::Eq: return compare<T>(out, a, b, [](A x, A y) { return x == y; });
    case BinaryOp::Ne: return compare<T>(out, a, b, [](A x, A y) { return x != y; });
    case BinaryOp::Lt: return compare<T>(out, a, b, [](A x, A y) { return x < y; });
    case BinaryOp::Le: return compare<T>(out, a, b, [](A x, A y) { return x <= y; });
    case BinaryOp::Gt: return compare<T>(out, a, b, [](A x, A y) { return x > y; });
    case BinaryOp::Ge: return compare<T>(out, a, b, [](A x, A y) { return x >= y; });
  }
  KILN_INTERNAL_ASSERT(false, "binary op {} reached the CPU kernel with dtype {}", static_cast<int>(op), a.dtype());
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  dispatch_all(a.dtype(), "binary", [&]<typename T>() { binary_typed<T>(op, out, a, b, alpha); });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where", [&]<typename T>() {
    map<T, bool, T, T>(out, [](bool c, T x, T y) { return c ? x : y; }, cond, a, b);
  });
}

}  // namespace

void register_binary_kernels() {
  dispatch::binary_kernels.set(DeviceType::CPU, &binary_cpu);
  dispatch::where_kernels.set(DeviceType::CPU, &where_cpu);
}

}  // namespace kiln::cpu
