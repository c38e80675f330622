// gelu_fast: the exact (erf) GELU of float16/bfloat16 results on the GPU, computed in float
// with an erfc fit on the hardware's approximate exp2 and reciprocal, for speed (the why, its
// accuracy and the check over all 65536 bfloat16 inputs are in ops/unary_cuda.cu's comment).
// Shared by the unary gelu kernel, fused_linear_gelu's epilogue and the sm_90a linear+GELU
// kernel's epilogue (sm90_epilogue.cuh), so a fused 16-bit GELU rounds exactly as the unfused
// one. Device code only; float32/float64 keep unary_math.h's exact formula.
#pragma once

#include <cuda_runtime.h>

namespace kiln::cuda_kernels {

namespace gelu_fast_detail {

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
// A shorter candidate (benchmark harness only until measured): the same form with P of degree 5,
// a minimax fit of ln(erfc(z) / t) + z^2 over t in [0.17, 1] (z <= 9.8, where the left tail of
// GELU reaches 2^-126); relative error of erfc 7.6e-6 there.
constexpr double kShortErfc[6] = {-1.26654175591371453,  1.01801351486743347, 0.254443298801033383,
                                  0.474493048810808574, -0.709190787425232491, 0.228790295196395543};
template <int Degree>
constexpr double erfc_fit_coefficient(int k) {
  double scale = 1.0;
  for (int i = 0; i < k; ++i) scale *= 8.0;
  return (Degree == 9 ? kNrErfcc[k] : kShortErfc[k]) * kLog2e * scale + (k == 0 ? 3.0 - 1.0 : 0.0);
}
// The fit's polynomial in t/8 by Horner's rule, coefficients folded at compile time.
template <int Degree, int K = 0>
__device__ __forceinline__ float erfc_fit_polynomial(float t) {
  constexpr float c = static_cast<float>(erfc_fit_coefficient<Degree>(K));
  if constexpr (K == Degree) return c;
  else return fmaf(t, erfc_fit_polynomial<Degree, K + 1>(t), c);
}

}  // namespace gelu_fast_detail

/// x * Phi(x), Phi(x) = P(N(0,1) <= x) = 1 - erfc(x / sqrt 2) / 2, in float, with the erfc fit's
/// polynomial of degree Degree (9: the shipped fit; 5: the shorter candidate).
template <int Degree = 9>
__device__ __forceinline__ float gelu_fast(float x) {
  using namespace gelu_fast_detail;
  const float a = fabsf(x);
  // t / 8 with t = 1 / (1 + z/2), z = |x| / sqrt 2.
  const float t = reciprocal_approx_ftz(fmaf(a, static_cast<float>(8.0 * 0.35355339059327376220), 8.0f));
  const float w = a * 0.84932180028801904272f;  // z * sqrt(log2 e), so -w^2 = -z^2 log2 e
  const float half_erfc = t * exp2_approx_ftz(fmaf(-w, w, erfc_fit_polynomial<Degree>(t)));
  return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
}

}  // namespace kiln::cuda_kernels
