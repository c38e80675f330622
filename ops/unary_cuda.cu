// CUDA bodies of the unary ops: the formulas of unary_math.h, the same functors the CPU
// kernels call, computed in float for the 16-bit types.
// One deliberate, device-only exception, for speed: the exact GELU of float16/bfloat16
// (gelu_fast below) evaluates erfc with a rational-exponential fit whose relative error is
// about 1.2e-7, far below the 16-bit result's rounding (2^-11 at best), in ~20 instructions
// where erff takes ~30 plus a branch. With erff the bfloat16 kernel was bound by arithmetic
// at 73% of copy bandwidth; with the fit in base 2 and the hardware's flush-to-zero
// reciprocal and exp2 it runs at ~88% (checked over all 65536 bfloat16 inputs: 8 differ from
// the correctly rounded result, by one unit in the last place, or flush a result below
// 2^-126 to zero). It stays here, not in unary_math.h: it is built on PTX instructions
// (approximate flush-to-zero exp2 and reciprocal) that the host has no bit-identical
// counterpart for, so a host copy would be a different function anyway; the CPU keeps the
// exact erf formula, as PyTorch's CPU kernel does. float32 and float64 GELU run the shared
// exact formula here too.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"
#include "unary_math.h"

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

// gelu_fast as a formula functor.
struct GeluFast16 {
  __device__ __forceinline__ float operator()(float x) const { return gelu_fast(x); }
};

// The formula the kernel for element type T runs: F, except the 16-bit GELU fast path.
template <typename T, typename F>
using DeviceFormula = std::conditional_t<is_half_v<T> && std::is_same_v<F, math::Gelu>, GeluFast16, F>;

template <typename T, typename F>
struct UnaryFn {
  F formula;
  __device__ T operator()(T v) const { return narrow<T>(formula(widen(v))); }
};

template <typename K>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
  using T = device_t<K>;
  const bool done = math::with_unary_formula<acc_t<T>>(op, [&]<typename F>(F) {
    map<K, K>("unary", out, UnaryFn<T, DeviceFormula<T, F>>{}, in);
  });
  KILN_INTERNAL_ASSERT(done, "unary op {} reached the CUDA kernel with dtype {}", static_cast<int>(op), out.dtype());
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), "unary", [&]<typename K>() { unary_typed<K>(op, out, in); });
}

}  // namespace

void register_unary_kernels() { dispatch::unary_kernels.set(DeviceType::CUDA, &unary_cuda); }

}  // namespace kiln::cuda_kernels
