// CPU bodies of the unary ops. 16-bit floats compute in float; the formulas match
// PyTorch's CPU kernels (exact-erf GELU, and its tanh form with sqrt(2/pi) and 0.044715).
#include <cmath>
#include <type_traits>

#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cpu {

namespace {

template <typename T, typename F>
void apply(const Tensor& out, const Tensor& in, F f) {
  map<T, T>(out, [f](T v) { return static_cast<T>(f(static_cast<acc_t<T>>(v))); }, in);
}

template <typename T>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
  using A = acc_t<T>;
  switch (op) {
    // Wrapping for integers: neg and abs of INT64_MIN give INT64_MIN, as in PyTorch.
    case UnaryOp::Neg: return apply<T>(out, in, [](A v) { return wrapping_neg(v); });
    case UnaryOp::Abs: return apply<T>(out, in, [](A v) { return v < A(0) ? wrapping_neg(v) : v; });
    // Written so NaN fails the test and passes through, as PyTorch's clamp_min(x, 0) does.
    case UnaryOp::Relu: return apply<T>(out, in, [](A v) { return v < A(0) ? A(0) : v; });
    default: break;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case UnaryOp::Exp: return apply<T>(out, in, [](A v) { return std::exp(v); });
      case UnaryOp::Log: return apply<T>(out, in, [](A v) { return std::log(v); });
      case UnaryOp::Sqrt: return apply<T>(out, in, [](A v) { return std::sqrt(v); });
      case UnaryOp::Rsqrt: return apply<T>(out, in, [](A v) { return A(1) / std::sqrt(v); });
      case UnaryOp::Tanh: return apply<T>(out, in, [](A v) { return std::tanh(v); });
      case UnaryOp::Sigmoid: return apply<T>(out, in, [](A v) { return A(1) / (A(1) + std::exp(-v)); });
      case UnaryOp::Silu: return apply<T>(out, in, [](A v) { return v / (A(1) + std::exp(-v)); });
      case UnaryOp::Gelu:
        return apply<T>(out, in, [](A v) {
          constexpr A kInvSqrt2 = A(0.70710678118654752440);
          return A(0.5) * v * (A(1) + std::erf(v * kInvSqrt2));
        });
      case UnaryOp::GeluTanh:
        return apply<T>(out, in, [](A v) {
          constexpr A kSqrt2OverPi = A(0.79788456080286535588);
          constexpr A kCoeff = A(0.044715);
          return A(0.5) * v * (A(1) + std::tanh(kSqrt2OverPi * (v + kCoeff * v * v * v)));
        });
      default: break;
    }
  }
  KILN_INTERNAL_ASSERT(false, "unary op {} reached the CPU kernel with dtype {}", static_cast<int>(op), out.dtype());
}

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), "unary", [&]<typename T>() { unary_typed<T>(op, out, in); });
}

}  // namespace

void register_unary_kernels() { dispatch::unary_kernels.set(DeviceType::CPU, &unary_cpu); }

}  // namespace kiln::cpu
