// gelu_fast: the exact (erf) GELU of float16/bfloat16 results on the GPU, computed in float
// with an erfc fit on the hardware's approximate exp2 and reciprocal, for speed (the why, its
// accuracy and the check over all 65536 inputs of each 16-bit type are in ops/unary_cuda.cu's
// comment; bench/sm90_linear_gelu_check.cu's `gelu` mode runs that check on the GPU for every
// fit below).
// Shared by the unary gelu kernel, fused_linear_gelu's epilogues and the sm_90a linear+GELU
// kernel's epilogue (sm90_epilogue.cuh), so a fused 16-bit GELU rounds exactly as the unfused
// one. Device code only; float32/float64 keep unary_math.h's exact formula.
//
// Why so few instructions matter: in the sm_90a kernel's ping-pong every epilogue instruction
// costs the other consumer's wgmma mainloop about a cycle (docs/notes/sm90_linear_gelu.md,
// v7), so the fit is chosen per type as short as the type's rounding allows (v8): <= 1 unit in
// the last place needs a float result within one unit, 2^-8 relative for bfloat16 and 2^-11 for
// float16. v9 had eleven instructions (erfc(z) = t exp2(-z^2 + P(t)), t = 1 / (1 + p z)); v13
// writes log2(erfc(z) / 2) as one Laurent polynomial in d = 1 + p z, whose d^2 and d terms
// carry -z^2 and whose 1/d terms replace both P(t) and the factor t: nine instructions for
// bfloat16 (7.0e-4), ten for float16 (1.0e-5).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace kiln::cuda_kernels {

/// Which erfc fit gelu_fast evaluates.
enum class GeluFit {
  Shipped,  ///< the library's: the Laurent fit per type (v13; nine instructions for bfloat16)
  Scaled,   ///< the Laurent fit with exp2 computing 16 h (bfloat16: one instruction more, see below)
  V9,       ///< the erfc fit shipped from v8 to v12 (eleven instructions; the harness compares it)
  Degree5,  ///< the one shipped from v5 to v7, in its own sequence (likewise)
  Nr9,      ///< Numerical Recipes' degree-9 erfcc, likewise (the fit before v5)
};

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
// min(x, y) that returns NaN when either is NaN (one FMNMX.NAN on sm_80 and later).
__device__ __forceinline__ float min_keeping_nan(float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(y));
  return r;
#else
  return x != x ? x : fminf(x, y);
#endif
}

// v13's form: log2(erfc(z) / 2) = a2 d^2 + a1 d + a0 + b1 / d + b2 / d^2 with d = 1 + p z,
// z = |x| / sqrt 2, a minimax fit of the absolute error (Lawson's iteration, plain Python;
// docs/notes/sm90_linear_gelu.md, v13) with p scanned. The d^2 and d terms hold erfc's -z^2
// exactly; the 1/d terms fit what is left, log2(erfc(z) e^(z^2) / 2), which falls like
// -log2(z) and which v9 split into a factor t and a polynomial in t. a0 includes the -1 of
// the 1/2. Errors are of erfc's relative error, over the range where the type's results are
// normal.
struct LaurentFit {
  double p;         // d = 1 + p z
  int inverse;      // how many 1/d terms (1 or 2)
  double a2, a1, a0, b1, b2;
};
// bfloat16: over z <= 9.8, error 7.0e-4 (p = 0.37 minimises it; one 1/d term).
constexpr LaurentFit kBf16Laurent = {0.37, 1, -10.529308668073469, 20.79033639215289, -15.436372311226426,
                                     4.176279685016427, 0.0};
// float16: over z <= 3, error 1.04e-5 (p = 0.52; two 1/d terms: one gives 2.8e-4, too close to
// float16's 2^-11 unit for the margin v8 kept).
constexpr LaurentFit kF16Laurent = {0.52, 2, -5.330217999324753, 10.424891596099709, -9.968053560706332,
                                    4.85299954043405, -0.9796345501655879};

// A fit of the form of Numerical Recipes' erfcc: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + p z),
// which keeps erfc's relative accuracy in the left tail of GELU. P is a minimax fit (on the
// absolute error of the exponent, Lawson's iteration) over t in [1 / (1 + p z_max), 1].
struct ErfcFit {
  double p;       // t = 1 / (1 + p z)
  int degree;     // of P
  double c[10];   // P's coefficients, lowest first
};
// The fits shipped from v8 to v12 (GeluFit::V9):
// bfloat16: degree 2, z <= 9.8 (past it the left tail of GELU is below 2^-126), error
// 1.65e-3 (p = 0.9 minimises it).
constexpr ErfcFit kBf16Fit = {0.9, 2, {-0.6907588650804838, 1.1642820295821128, -0.47438213179403743}};
// float16: degree 3, z <= 3 (past it GELU is below float16's smallest normal, 2^-14, and
// may flush), error 4.5e-5.
constexpr ErfcFit kF16Fit = {
    0.45, 3, {-1.3352492816404415, 0.758464474727434, 0.9819791111242318, -0.4051536039691889}};
// v5-v7's degree 5 over z <= 9.8 (7.6e-6) and Numerical Recipes' own coefficients (< 1.2e-7
// for every z >= 0).
constexpr ErfcFit kDegree5Fit = {0.5, 5,
                                 {-1.26654175591371453, 1.01801351486743347, 0.254443298801033383,
                                  0.474493048810808574, -0.709190787425232491, 0.228790295196395543}};
constexpr ErfcFit kNr9Fit = {0.5, 9,
                             {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                              -1.13520398, 1.48851587, -0.82215223, 0.17087277}};

// The erfc fit of the older fits (V9, Degree5, Nr9).
template <typename T, GeluFit F>
constexpr ErfcFit fit_for() {
  if constexpr (F == GeluFit::Degree5) return kDegree5Fit;
  else if constexpr (F == GeluFit::Nr9) return kNr9Fit;
  else if constexpr (std::is_same_v<T, __half>) return kF16Fit;
  else return kBf16Fit;
}

constexpr double kLog2e = 1.44269504088896340736;
constexpr double kSqrtHalf = 0.70710678118654752440;

// The fit rewritten for the hardware: base 2 (coefficients times log2 e), GELU's factor 1/2
// folded into the constant term, and t scaled by 1/8 (coefficient k times 8^k, exponent +3) so
// that exp2 underflows only where the final result is below 2^-126 anyway. Coefficient k
// multiplies (t/8)^k.
template <typename T, GeluFit F>
constexpr double folded_coefficient(int k) {
  double scale = 1.0;
  for (int i = 0; i < k; ++i) scale *= 8.0;
  return fit_for<T, F>().c[k] * kLog2e * scale + (k == 0 ? 3.0 - 1.0 : 0.0);
}
// The fit's polynomial in t/8 by Horner's rule, coefficients folded at compile time.
template <typename T, GeluFit F, int K = 0>
__device__ __forceinline__ float fit_polynomial(float t) {
  constexpr float c = static_cast<float>(folded_coefficient<T, F>(K));
  if constexpr (K == fit_for<T, F>().degree) return c;
  else return fmaf(t, fit_polynomial<T, F, K + 1>(t), c);
}

}  // namespace gelu_fast_detail

/// x * Phi(x), Phi(x) = P(N(0,1) <= x) = 1 - erfc(x / sqrt 2) / 2, in float, with the fit F for
/// the 16-bit type T (the result is to be rounded to T). NaN in gives NaN, +inf gives +inf and
/// -inf NaN, as x Phi(x) evaluated in floating point does (and PyTorch).
template <typename T, GeluFit F = GeluFit::Shipped>
__device__ __forceinline__ float gelu_fast(float x) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "gelu_fast: 16-bit types only");
  using namespace gelu_fast_detail;
  if constexpr (F == GeluFit::Shipped || F == GeluFit::Scaled) {
    // v13, nine instructions for bfloat16 (ten for float16 and for Scaled bfloat16):
    // c = min(x, 1e30), keeping NaN (FMNMX.NAN): +inf becomes 1e30 so that |c| * h is 0 there,
    // while -inf keeps |c| = inf and gives inf * 0 = NaN, and NaN runs through d, s and e.
    // h = erfc(z) / 2 = 2^E with E the Laurent polynomial in d = 1 + p |c| / sqrt 2 (one FFMA, |c|
    // an operand modifier), s = 1/d (MUFU.RCP), E in three FFMAs (four with a second 1/d term),
    // 2^E (MUFU.EX2), and the result in one FFMA:
    // x >= 0: x (1 - h) = x - |c| h; x < 0: x h = -0 - |c| h (-0, not +0: a left tail that
    // underflows keeps its sign, -0 as x Phi(x) gives, and so does -0 itself).
    // exp2 flushes h below 2^-126, so for bfloat16 the shipped form returns -0 for the three
    // inputs in [-13.125, -13] whose true results lie in [2^-126, 2^-123) (float32's erf formula,
    // PyTorch's and Kiln's CPU path, returns 0 there and from x = -5.9 down); Scaled computes
    // 2^(E + 4) = 16 h against |c| / 16 instead (one FMUL more), which keeps them.
    constexpr LaurentFit f = std::is_same_v<T, __half> ? kF16Laurent : kBf16Laurent;
    constexpr bool kScaled = F == GeluFit::Scaled && std::is_same_v<T, __nv_bfloat16>;
    constexpr double kScale = kScaled ? 16.0 : 1.0;
    float c = min_keeping_nan(x, 1e30f);
    if constexpr (kScaled) c *= static_cast<float>(1.0 / kScale);
    const float d = fmaf(fabsf(c), static_cast<float>(f.p * kSqrtHalf * kScale), 1.0f);
    const float s = reciprocal_approx_ftz(d);
    constexpr float a0 = static_cast<float>(f.a0 + (kScaled ? 4.0 : 0.0));
    float w;
    if constexpr (f.inverse == 2)
      w = fmaf(fmaf(static_cast<float>(f.b2), s, static_cast<float>(f.b1)), s, a0);
    else
      w = fmaf(static_cast<float>(f.b1), s, a0);
    const float e = exp2_approx_ftz(fmaf(fmaf(static_cast<float>(f.a2), d, static_cast<float>(f.a1)), d, w));
    return fmaf(-fabsf(c), e, fmaxf(x, -0.0f));
  } else {
    constexpr ErfcFit fit = fit_for<T, F>();
    // t / 8 with t = 1 / (1 + p z), z = |x| / sqrt 2.
    constexpr float kT8 = static_cast<float>(8.0 * fit.p * kSqrtHalf);
    if constexpr (F == GeluFit::V9) {
      // Eleven instructions (v9). a = |c| with c = min(x, 1e30): |x|, except +inf -> 1e30 so
      // that a * h stays 0 there, while -inf keeps a = inf and gives inf * 0 = NaN (and NaN
      // keeps its NaN through x * x below). The absolute value is an operand modifier of both
      // FFMAs that read it, so a costs one FMNMX.
      const float c = fminf(x, 1e30f);
      const float t = reciprocal_approx_ftz(fmaf(fabsf(c), kT8, 8.0f));
      const float e = exp2_approx_ftz(fmaf(x * x, static_cast<float>(-0.5 * kLog2e), fit_polynomial<T, F>(t)));
      return fmaf(-fabsf(c), t * e, fmaxf(x, -0.0f));
    } else {
      // v5-v7's sequence (fifteen instructions with degree 5), kept for the harness's comparison.
      const float a = fabsf(x);
      const float t = reciprocal_approx_ftz(fmaf(a, kT8, 8.0f));
      const float w = a * static_cast<float>(0.84932180028801904272);  // z * sqrt(log2 e)
      const float half_erfc = t * exp2_approx_ftz(fmaf(-w, w, fit_polynomial<T, F>(t)));
      return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
    }
  }
}

}  // namespace kiln::cuda_kernels
