// gelu_fast: the exact (erf) GELU of float16/bfloat16 results on the GPU, computed in float
// with an erfc fit on the hardware's approximate exp2 and reciprocal, for speed (the why, its
// accuracy and the check over all 65536 inputs of each 16-bit type are in ops/unary_cuda.cu's
// comment; bench/sm90_linear_gelu_check.cu's `gelu` mode runs that check on the GPU for both
// fits below).
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

// The form of Numerical Recipes' erfcc, erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z/2), which
// keeps erfc's relative accuracy in the left tail of GELU, rewritten for the hardware: base 2
// (coefficients times log2 e), the GELU's factor 1/2 folded into the constant term, and t
// scaled by 1/8 (coefficient k times 8^k, exponent +3) so that exp2 underflows only where the
// final result is below 2^-126 anyway. erfc_fit_coefficient(k) multiplies (t/8)^k. Two fits:
//   - degree 5 (shipped since v5 of the sm_90a kernel, docs/notes/sm90_linear_gelu.md): a
//     minimax fit of P(t) = ln(erfc(z) / t) + z^2 over t in [0.17, 1], i.e. z <= 9.8, past which
//     the left tail of GELU is below 2^-126 (fit error 7.6e-6 relative in erfc; four FMAs fewer
//     per element than degree 9, which the in-register epilogue of the fused kernel feels);
//   - degree 9: Numerical Recipes' own coefficients (relative error < 1.2e-7 for every z >= 0),
//     the fit before v5, kept for the benchmark harness's comparison.
constexpr double kLog2e = 1.44269504088896340736;
constexpr double kNrErfcc[10] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
constexpr double kShortErfc[6] = {-1.26654175591371453,  1.01801351486743347, 0.254443298801033383,
                                  0.474493048810808574, -0.709190787425232491, 0.228790295196395543};
template <int Degree>
constexpr double erfc_fit_coefficient(int k) {
  static_assert(Degree == 5 || Degree == 9, "erfc_fit_coefficient: the fits have degree 5 or 9");
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

/// The degree of the fit every 16-bit GELU uses (unary, portable fused epilogue, sm_90a kernel).
inline constexpr int kGeluFastDegree = 5;

/// x * Phi(x), Phi(x) = P(N(0,1) <= x) = 1 - erfc(x / sqrt 2) / 2, in float, with the erfc fit's
/// polynomial of degree Degree (5: the shipped fit; 9: Numerical Recipes', for comparison).
template <int Degree = kGeluFastDegree>
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
