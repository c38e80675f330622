// CUDA bodies of the unary ops, the same formulas as unary_cpu.cpp computed in float for
// the 16-bit types (exact-erf GELU, and its tanh form with sqrt(2/pi) and 0.044715).
// One exception, for speed: the exact GELU of float16/bfloat16 evaluates erfc with a
// rational-exponential fit whose relative error is about 1.2e-7, far below the 16-bit
// result's rounding (2^-11 at best), in ~20 instructions where erff takes ~30 plus a branch.
// With erff the bfloat16 kernel was bound by arithmetic at 73% of copy bandwidth; with the
// fit in base 2 and the hardware's flush-to-zero reciprocal and exp2 it runs at ~88%
// (checked over all 65536 bfloat16 inputs: 8 differ from the correctly rounded result, by
// one unit in the last place, or flush a result below 2^-126 to zero).
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cuda_kernels {

namespace {

// The MUFU approximations with flush-to-zero: no denormal fix-up instructions around them.
__device__ __forceinline__ float exp2_approx_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float reciprocal_approx_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// Numerical Recipes' erfcc fit, erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z/2) and P of
// degree 9 (relative error < 1.2e-7 for every z >= 0, so the left tail of GELU keeps its
// relative accuracy), rewritten for the hardware: base 2 (coefficients times log2 e), the
// GELU's factor 1/2 folded into the constant term, and t scaled by 1/8 (coefficient k
// times 8^k, exponent +3) so that exp2 underflows only where the final result is below
// 2^-126 anyway. erfc_fit_coefficient(k) multiplies (t/8)^k.
constexpr double kLog2e = 1.44269504088896340736;
constexpr double kNrErfcc[10] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
constexpr double erfc_fit_coefficient(int k) {
  double scale = 1.0;
  for (int i = 0; i < k; ++i) scale *= 8.0;
  return kNrErfcc[k] * kLog2e * scale + (k == 0 ? 3.0 - 1.0 : 0.0);
}
// The fit's polynomial in t/8 by Horner's rule, coefficients folded at compile time.
template <int K = 0>
__device__ __forceinline__ float erfc_fit_polynomial(float t) {
  constexpr float c = static_cast<float>(erfc_fit_coefficient(K));
  if constexpr (K == 9) return c;
  else return fmaf(t, erfc_fit_polynomial<K + 1>(t), c);
}

// x * Phi(x), Phi(x) = P(N(0,1) <= x) = 1 - erfc(x / sqrt 2) / 2.
__device__ __forceinline__ float gelu_fast(float x) {
  const float a = fabsf(x);
  // t / 8 with t = 1 / (1 + z/2), z = |x| / sqrt 2.
  const float t = reciprocal_approx_ftz(fmaf(a, static_cast<float>(8.0 * 0.35355339059327376220), 8.0f));
  const float w = a * 0.84932180028801904272f;  // z * sqrt(log2 e), so -w^2 = -z^2 log2 e
  const float half_erfc = t * exp2_approx_ftz(fmaf(-w, w, erfc_fit_polynomial(t)));
  return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
}

template <typename T, UnaryOp Op>
struct UnaryFn {
  __device__ T operator()(T v) const {
    using A = acc_t<T>;
    const A x = widen(v);
    // Integers wrap, as on the CPU: neg and abs of INT64_MIN give INT64_MIN.
    if constexpr (Op == UnaryOp::Neg) return narrow<T>(wrapping_neg(x));
    else if constexpr (Op == UnaryOp::Abs) return narrow<T>(x < A(0) ? wrapping_neg(x) : x);
    else if constexpr (Op == UnaryOp::Relu) return narrow<T>(x < A(0) ? A(0) : x);  // NaN stays NaN
    else if constexpr (Op == UnaryOp::Exp) return narrow<T>(exp(x));
    else if constexpr (Op == UnaryOp::Log) return narrow<T>(log(x));
    else if constexpr (Op == UnaryOp::Sqrt) return narrow<T>(sqrt(x));
    else if constexpr (Op == UnaryOp::Rsqrt) return narrow<T>(A(1) / sqrt(x));
    else if constexpr (Op == UnaryOp::Tanh) return narrow<T>(tanh(x));
    else if constexpr (Op == UnaryOp::Sigmoid) return narrow<T>(A(1) / (A(1) + exp(-x)));
    else if constexpr (Op == UnaryOp::Silu) return narrow<T>(x / (A(1) + exp(-x)));
    else if constexpr (Op == UnaryOp::Gelu && is_half_v<T>) return narrow<T>(gelu_fast(x));
    else if constexpr (Op == UnaryOp::Gelu) return narrow<T>(A(0.5) * x * (A(1) + erf(x * A(0.70710678118654752440))));
    else return narrow<T>(A(0.5) * x * (A(1) + tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x))));
  }
};

template <typename K, UnaryOp Op>
void run(const Tensor& out, const Tensor& in) {
  map<K, K>("unary", out, UnaryFn<device_t<K>, Op>{}, in);
}

template <typename K>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
  switch (op) {
    case UnaryOp::Neg: return run<K, UnaryOp::Neg>(out, in);
    case UnaryOp::Abs: return run<K, UnaryOp::Abs>(out, in);
    case UnaryOp::Relu: return run<K, UnaryOp::Relu>(out, in);
    default: break;
  }
  if constexpr (!std::is_integral_v<K>) {
    switch (op) {
      case UnaryOp::Exp: return run<K, UnaryOp::Exp>(out, in);
      case UnaryOp::Log: return run<K, UnaryOp::Log>(out, in);
      case UnaryOp::Sqrt: return run<K, UnaryOp::Sqrt>(out, in);
      case UnaryOp::Rsqrt: return run<K, UnaryOp::Rsqrt>(out, in);
      case UnaryOp::Tanh: return run<K, UnaryOp::Tanh>(out, in);
      case UnaryOp::Sigmoid: return run<K, UnaryOp::Sigmoid>(out, in);
      case UnaryOp::Silu: return run<K, UnaryOp::Silu>(out, in);
      case UnaryOp::Gelu: return run<K, UnaryOp::Gelu>(out, in);
      case UnaryOp::GeluTanh: return run<K, UnaryOp::GeluTanh>(out, in);
      default: break;
    }
  }
  KILN_INTERNAL_ASSERT(false, "unary op {} reached the CUDA kernel with dtype {}", static_cast<int>(op), out.dtype());
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), "unary", [&]<typename K>() { unary_typed<K>(op, out, in); });
}

}  // namespace

void register_unary_kernels() { dispatch::unary_kernels.set(DeviceType::CUDA, &unary_cuda); }

}  // namespace kiln::cuda_kernels
