// Vectorised CPU versions of the transcendental unary formulas of unary_math.h (exp, tanh,
// sigmoid, silu, exact and tanh GELU) and of the GELU derivatives (gelu_math.h), instead of one
// scalar libm call per element. Built on Eigen's packet primitives, so every SIMD width Eigen
// supports (AVX-512, AVX2, NEON, ...) compiles the same code. CPU-only: the CUDA kernels keep
// unary_math.h's functors.
//
// The float exponential is our own (exp_float, exp_neg_float): round-to-nearest range
// reduction x = n ln2 + r with a two-constant Cody-Waite split, a degree-6 polynomial on
// |r| <= ln2/2 and 2^n applied in one step (AVX-512's scalef, else Eigen's pldexp): 13 vector
// instructions per packet with AVX-512 where Eigen's pexp and the overflow check it needed
// took 23, and exact range reduction up to float's overflow (0.84 ulp at worst with FMA,
// 1.14 without; Eigen's lost 5.6 near 88.7). The formulas that need e^-|v| only (sigmoid,
// silu, both GELUs and their derivatives) take it from exp_neg_float, so nothing overflows and
// no lane needs a slow path; with AVX-512 their one division becomes a reciprocal estimate and
// a Newton step (recip_float), and selects use mask registers. Those few helpers use AVX-512
// intrinsics behind EIGEN_VECTORIZE_AVX512 with an Eigen-primitive fallback (checked built
// for AVX2 and for the x86-64 baseline). Double keeps Eigen's exp and the scalar functors'
// expressions.
//
// The GELUs are written so their tails keep relative accuracy: exact GELU through an erfc
// (x/2 (1 + erf) cancels for negative x), with e^(-x^2/2) from the exactly split square;
// tanh GELU as x * sigmoid(2u). Their NaN, Inf and signed-zero results are the scalar
// formulas'; bench/cpu_math_accuracy prints the errors against float64 over a dense sweep, and
// tests/ops/test_vec_math.cpp holds them there. They run with subnormal results flushed to
// zero (FlushSubnormalsToZero): a third of a wide layer's GELU inputs can lie where the
// results are subnormal, and on Intel cores every instruction that writes (or later reads) a
// subnormal float takes a microcode assist, which made an MLP's GELU 14x and the GEMM after it
// 2.5x slower on the GPU machine's Xeon host (BENCHMARKS.md 9). The products are ordered so
// that the forward results flush only below FLT_MIN (to a zero of the scalar formula's sign),
// the derivatives below 8e-38 (exact) and 3e-36 (tanh form); exp, sigmoid and silu keep their
// subnormal results, as PyTorch's do.
//
// Every element goes through the same packet code, one Eigen packet (16 floats with AVX-512)
// at a time, loaded and stored straight from the arrays; only a final partial packet is
// padded with zeros in a small buffer. Packet operations are lane-wise, so an element's result
// does not depend on where its run starts or ends, how the engine chunks the work over
// threads, or the tensor's layout.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <variant>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "../binary_math.h"
#include "../unary_math.h"

namespace kiln::cpu::vec {

namespace ei = Eigen::internal;

/// Eigen's widest packet of A (Packet16f with AVX-512, Packet8f with AVX2, ...).
template <typename A>
using Packet = typename ei::packet_traits<A>::type;

/// Values per packet of A.
template <typename A>
inline constexpr int64_t kLanes = ei::unpacket_traits<Packet<A>>::size;

/// A packet of c in every lane.
template <typename A>
inline Packet<A> splat(A c) {
  return ei::pset1<Packet<A>>(c);
}

/// For its scope, this thread's float arithmetic flushes subnormal results to zero (x86's
/// MXCSR flush-to-zero bit; the previous setting is restored), so no instruction writes one;
/// a no-op on other CPUs, which compute subnormals without a slow path (or where flushing is
/// not this bit). Subnormal inputs are not touched (no denormals-are-zero): a user's subnormal
/// x keeps its value.
class FlushSubnormalsToZero {
 public:
#if defined(__SSE__)
  FlushSubnormalsToZero() : saved_(_mm_getcsr()) {
    if (!(saved_ & kFlushToZeroBit)) _mm_setcsr(saved_ | kFlushToZeroBit);
  }
  ~FlushSubnormalsToZero() {
    if (!(saved_ & kFlushToZeroBit)) _mm_setcsr(saved_);
  }
#endif
  FlushSubnormalsToZero(const FlushSubnormalsToZero&) = delete;
  FlushSubnormalsToZero& operator=(const FlushSubnormalsToZero&) = delete;

 private:
#if defined(__SSE__)
  static constexpr unsigned kFlushToZeroBit = 0x8000;  // MXCSR.FTZ
  unsigned saved_;
#endif
};

/// 1 / d for finite d in [1, 16]: with AVX-512 the 14-bit estimate (vrcp14ps) and one Newton
/// step e + e (1 - d e), within 1 ulp (a 16-lane division issues only every ~10 cycles
/// there); a division elsewhere. NaN gives NaN.
inline Packet<float> recip_float(const Packet<float>& d) {
#if defined(EIGEN_VECTORIZE_AVX512)
  const __m512 e = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(e, _mm512_fnmadd_ps(d, e, _mm512_set1_ps(1.0f)), e);
#else
  return ei::pdiv(splat(1.0f), d);
#endif
}

/// y 2^n for integral n (no range limit; callers pass n in [-185, 129]), rounded once (to a
/// subnormal, zero or inf where the product is one): AVX-512's scalef, else Eigen's pldexp.
inline Packet<float> scale_pow2_float(const Packet<float>& y, const Packet<float>& n) {
#if defined(EIGEN_VECTORIZE_AVX512)
  return _mm512_scalef_ps(y, n);
#else
  return ei::pldexp(y, n);
#endif
}

/// a b in the lanes where x < 0, b elsewhere (NaN lanes too). With AVX-512 a compare into a
/// mask register and a masked multiply (Eigen's pcmp_lt/pselect go through a vector mask: two
/// more instructions).
inline Packet<float> mul_where_negative(const Packet<float>& x, const Packet<float>& a, const Packet<float>& b) {
#if defined(EIGEN_VECTORIZE_AVX512)
  return _mm512_mask_mul_ps(b, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), a, b);
#else
  return ei::pselect(ei::pcmp_lt(x, ei::pzero(x)), ei::pmul(a, b), b);
#endif
}

/// a in the lanes where x < bound, b elsewhere (NaN lanes too), as mul_where_negative.
inline Packet<float> where_less(const Packet<float>& x, float bound, const Packet<float>& a, const Packet<float>& b) {
#if defined(EIGEN_VECTORIZE_AVX512)
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(bound), _CMP_LT_OQ), b, a);
#else
  return ei::pselect(ei::pcmp_lt(x, splat(bound)), a, b);
#endif
}

/// b in the lanes where x <= 0, a - b elsewhere (NaN lanes too), as mul_where_negative. (b for
/// both zeros keeps -0's sign where b is x times something.)
inline Packet<float> keep_where_not_positive(const Packet<float>& x, const Packet<float>& a, const Packet<float>& b) {
#if defined(EIGEN_VECTORIZE_AVX512)
  return _mm512_mask_sub_ps(b, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), a, b);
#else
  return ei::pselect(ei::pcmp_le(x, ei::pzero(x)), b, ei::psub(a, b));
#endif
}

/// min(|x|, hi) for hi > 0, NaN for NaN (Eigen's pmin returns its first argument for a NaN;
/// AVX-512's one-instruction vrangeps would return hi).
inline Packet<float> abs_clamped(const Packet<float>& x, float hi) { return ei::pmin(ei::pabs(x), splat(hi)); }

/// a^2 - q exactly, where q is a^2 rounded (the square's rounding error), for |a| <= 2^60: one
/// FMA where pmadd is fused (AVX-512, FMA3, ARM with FMA), else Veltkamp's split of a into
/// 12-bit halves whose products are exact (Dekker), so the result is the same either way.
inline Packet<float> square_error(const Packet<float>& a, const Packet<float>& q) {
#if defined(EIGEN_VECTORIZE_AVX512)
  return _mm512_fmsub_ps(a, a, q);
#elif defined(EIGEN_VECTORIZE_FMA) || defined(__ARM_FEATURE_FMA)
  return ei::pmadd(a, a, ei::pnegate(q));
#else
  const Packet<float> c = ei::pmul(a, splat(4097.0f));  // 2^12 + 1
  const Packet<float> hi = ei::psub(c, ei::psub(c, a)), lo = ei::psub(a, hi);
  const Packet<float> cross = ei::pmul(ei::pmul(hi, lo), splat(2.0f));
  return ei::padd(ei::padd(ei::psub(ei::pmul(hi, hi), q), cross), ei::pmul(lo, lo));
#endif
}

namespace detail {

// exp on the reduced range: e^(k s) for |k s| <= ln2/2 (slightly more after rounding), with
// k = kSign 2^-kHalvings (1, -1, -1/2: the coefficients scale exactly), as
// 1 + r + r^2 Q(r) with Q of degree 4 fitted here (least squares on the relative error over
// [-ln2/2, ln2/2], reweighted to minimax: 3.1e-9), evaluated by Horner.
template <int kSign, int kHalvings>
inline Packet<float> exp_reduced(const Packet<float>& s) {
  constexpr float kScale = (kSign < 0 ? -1.0f : 1.0f) / static_cast<float>(1 << kHalvings);
  static constexpr float c[] = {1.0f,           1.0f,           0.4999999345f,  0.1666652069f,
                                0.04166838812f, 0.008368709523f, 0.001381455494f};
  constexpr auto scaled = [](int k) {
    float v = c[k];
    for (int i = 0; i < k; ++i) v *= kScale;
    return v;
  };
  Packet<float> p = splat(scaled(6));
  for (int k = 5; k >= 0; --k) p = ei::pmadd(p, s, splat(scaled(k)));
  return p;
}

inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693145751953125f;     // ln 2 to 16 bits: n ln2_hi is exact for |n| < 256
inline constexpr float kLn2Lo = 1.428606765330187e-06f;  // ln 2 - ln2_hi
inline constexpr float kRoundMagic = 12582912.0f;        // 1.5 * 2^23: adding it rounds to an integer

}  // namespace detail

/// e^x for float packets, to about 1 ulp over float's whole range: 0 below -104 (e^-104 is
/// below half the smallest subnormal), inf above 88.72, NaN for NaN. x = n ln2 + r with n
/// rounded to nearest (the magic-number add), r from a two-constant Cody-Waite split (exact
/// first step, FMA), e^r from exp_reduced, then y 2^n.
inline Packet<float> exp_float(const Packet<float>& v) {
  using P = Packet<float>;
  // Clamping keeps n in scale_pow2_float's range; e^-104 and e^88.8 round to 0 and inf as the
  // unclamped values would. Eigen's pmin/pmax return their first argument for a NaN.
  const P x = ei::pmin(ei::pmax(v, splat(-104.0f)), splat(88.8f));
  const P magic = splat(detail::kRoundMagic);
  const P n = ei::psub(ei::pmadd(x, splat(detail::kLog2e), magic), magic);
  P r = ei::pmadd(n, splat(-detail::kLn2Hi), x);
  r = ei::pmadd(n, splat(-detail::kLn2Lo), r);
  return scale_pow2_float(detail::exp_reduced<1, 0>(r), n);
}

/// e^-(q + q_lo) = m 2^n as its two factors: returns m (in [0.7, 1.5]) and sets n (integral),
/// for q in [0, 2^21] or NaN (callers clamp q, abs_clamped), where q_lo is a small correction
/// (the rounding error of q when q is a rounded product) or zero if kWithLo is false; with
/// kHalf, e^-((q + q_lo) / 2) (the halving folded into the constants, so the caller need not
/// halve). A caller that multiplies the result by something else can multiply m first and
/// apply 2^n last, so a product that is a normal float never passes through a subnormal one.
template <bool kWithLo, bool kHalf = false>
inline Packet<float> exp_neg_float_parts(const Packet<float>& q, const Packet<float>& q_lo, Packet<float>& n) {
  using P = Packet<float>;
  constexpr float h = kHalf ? 0.5f : 1.0f;
  const P magic = splat(detail::kRoundMagic);
  n = ei::psub(ei::pmadd(q, splat(-detail::kLog2e * h), magic), magic);  // -h q = n ln2 - h s
  P s = ei::pmadd(n, splat(detail::kLn2Hi / h), q);  // exact: |n| < 256, ln2_hi has 16 bits
  s = ei::pmadd(n, splat(detail::kLn2Lo / h), s);
  if constexpr (kWithLo) s = ei::padd(s, q_lo);
  return detail::exp_reduced<-1, kHalf ? 1 : 0>(s);
}

/// e^-(q + q_lo) as exp_neg_float_parts, applied: at most 1, so nothing overflows; subnormal
/// results are rounded once, and q above 104 (208 with kHalf) gives 0.
template <bool kWithLo, bool kHalf = false>
inline Packet<float> exp_neg_float(const Packet<float>& q, const Packet<float>& q_lo) {
  Packet<float> n;
  const Packet<float> m = exp_neg_float_parts<kWithLo, kHalf>(q, q_lo, n);
  return scale_pow2_float(m, n);
}

/// e^x: exp_float for float, Eigen's vectorised exp for double.
template <typename A>
inline Packet<A> exp_packet(const Packet<A>& x) {
  if constexpr (std::is_same_v<A, float>)
    return exp_float(x);
  else
    return ei::pexp(x);
}

/// 1 / (1 + e^-x) for float as e r or r, r = 1 / (1 + e), e = e^-|x| <= 1 (x < 0 or not):
/// nothing overflows, and the negative tail keeps its relative accuracy down to the subnormals.
inline Packet<float> sigmoid_float(const Packet<float>& x) {
  const Packet<float> e = exp_neg_float<false>(abs_clamped(x, 104.0f), ei::pzero(x));
  const Packet<float> r = recip_float(ei::padd(splat(1.0f), e));
  return mul_where_negative(x, e, r);
}

/// erfc(|x| / sqrt 2) / 2: e^(-x^2 / 2) P(t) with t = 1 / (1 + c |x|) and P a degree-8
/// polynomial fitted here (least squares on the relative error of erfc(z) e^(z^2) / 2 over
/// z = |x| / sqrt 2 in [0, 9.5], reweighted to minimax: 8.7e-8 with float coefficients).
/// x^2 is split exactly into q + q_lo (square_error), so e^(-x^2/2) keeps about 1 ulp in the tail. |x|
/// is clamped to 16 (e^-128 is 0 in float), which keeps t and q finite for infinite x.
/// Relative accuracy in the tail, where 1 + erf(x / sqrt 2) would cancel. Returned as its two
/// factors: e^(-x^2 / 2) in `gauss` (the GELU derivative's density shares it) and P(t) in `p`,
/// so that callers can multiply x into p first.
inline void half_erfc_abs(const Packet<float>& x, Packet<float>& gauss, Packet<float>& p) {
  using P = Packet<float>;
  // t = 1 / (1 + p z) with p = kC sqrt 2 = 0.33 (fitted with this float's exact value); p trades
  // the fit's error against the rounding error of t, which P amplifies most near z = 0.
  constexpr float kC = 0.23334524035453796f;
  constexpr float c[] = {1.439394211e-06f, 9.316021223e-02f, 9.157191169e-02f,  1.003933797e-01f, 2.378162824e-02f,
                         2.044921719e-01f, -1.762142227e-01f, 2.306355196e-01f, -6.782208036e-02f};
  const P a = abs_clamped(x, 16.0f);
  const P t = recip_float(ei::pmadd(a, splat(kC), splat(1.0f)));
  p = splat(c[8]);
  for (int k = 7; k >= 0; --k) p = ei::pmadd(p, t, splat(c[k]));
  const P a_sq = ei::pmul(a, a);
  gauss = exp_neg_float<true, true>(a_sq, square_error(a, a_sq));
}

/// Phi(x) from E/2 = erfc(|x| / sqrt 2) / 2 (half_erfc_abs's product): E/2 for x <= 0, 1 - E/2 above.
inline Packet<float> cdf_from_half_erfc(const Packet<float>& x, const Packet<float>& half) {
  return keep_where_not_positive(x, splat(1.0f), half);
}

/// 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) of the tanh GELU, as x (a + b x^2); x_sq = x^2.
inline Packet<float> gelu_tanh_2u(const Packet<float>& x, const Packet<float>& x_sq) {
  constexpr float kTwoBeta = 2.0f * 0.79788456080286535588f;
  return ei::pmul(x, ei::pmadd(x_sq, splat(kTwoBeta * 0.044715f), splat(kTwoBeta)));
}

/// VecUnary<A, F>::packet(x) computes F(x) lane by lane; left undefined (no vector path) for
/// the formulas and types not listed.
template <typename A, typename F>
struct VecUnary;

template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Exp> {
  static Packet<A> packet(const Packet<A>& x) { return exp_packet<A>(x); }
};

/// 1 / (1 + e^-x), as math::Sigmoid: sigmoid_float for float.
template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Sigmoid> {
  static Packet<A> packet(const Packet<A>& x) {
    if constexpr (std::is_same_v<A, float>) {
      return sigmoid_float(x);
    } else {
      const Packet<A> one = splat<A>(1);
      return ei::pdiv(one, ei::padd(one, exp_packet<A>(ei::pnegate(x))));
    }
  }
};

/// x / (1 + e^-x), as math::Silu: x sigmoid_float(x) for float.
template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Silu> {
  static Packet<A> packet(const Packet<A>& x) {
    if constexpr (std::is_same_v<A, float>)
      return ei::pmul(x, sigmoid_float(x));
    else
      return ei::pdiv(x, ei::padd(splat<A>(1), exp_packet<A>(ei::pnegate(x))));
  }
};

/// Eigen's float tanh (a rational approximation; its double tanh is not vectorised).
template <>
struct VecUnary<float, math::Tanh> {
  static Packet<float> packet(const Packet<float>& x) { return ei::ptanh(x); }
};

/// x Phi(x) = x/2 erfc(-x / sqrt 2) from E/2 = erfc(|x| / sqrt 2) / 2 = e^(-x^2/2) p
/// (half_erfc_abs): the tail x E/2 = (x p) e^(-x^2/2) for x <= 0, x - x E/2 above, which keeps
/// the negative tail's relative accuracy (x/2 (1 + erf) cancels there); x p first, so only a
/// result below FLT_MIN is subnormal (flushed: kSubnormalsToZero). x is held at 16 in the
/// tail's product, where E is 0, so that x = inf gives inf.
template <>
struct VecUnary<float, math::Gelu> {
  static constexpr bool kSubnormalsToZero = true;
  static Packet<float> packet(const Packet<float>& x) {
    Packet<float> gauss, p;
    half_erfc_abs(x, gauss, p);
    const Packet<float> tail = ei::pmul(ei::pmul(ei::pmin(x, splat(16.0f)), p), gauss);
    return keep_where_not_positive(x, x, tail);
  }
};

/// x/2 (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed as x sigmoid(2u) (the
/// same function: 1 + tanh u = 2 / (1 + e^-2u)) so neither tail cancels: with e = e^-|2u| = m 2^n
/// and r = 1 / (1 + e), x r for 2u >= 0 and (x (m r)) 2^n below (x (e r) rounded alike where
/// it is normal), 2^n applied last so that only a result below FLT_MIN is subnormal (flushed:
/// kSubnormalsToZero). Below 2u = -89.7 (x < -10.1) the result is below FLT_MIN, and m is
/// taken as 0 there: the 2^n of |2u| held at 104 would not make it small enough.
template <>
struct VecUnary<float, math::GeluTanh> {
  static constexpr bool kSubnormalsToZero = true;
  static Packet<float> packet(const Packet<float>& x) {
    using P = Packet<float>;
    const P two_u = gelu_tanh_2u(x, ei::pmul(x, x));
    P n;
    const P m = where_less(two_u, -89.7f, ei::pzero(x),
                           exp_neg_float_parts<false>(abs_clamped(two_u, 104.0f), ei::pzero(x), n));
    const P r = recip_float(ei::padd(splat(1.0f), scale_pow2_float(m, n)));
    return where_less(two_u, 0.0f, scale_pow2_float(ei::pmul(x, ei::pmul(m, r)), n), ei::pmul(x, r));
  }
};

/// Whether unary formula F has a vector path for element type A.
template <typename A, typename F>
inline constexpr bool has_vec_unary = requires(const Packet<A>& x) { VecUnary<A, F>::packet(x); };

/// VecBinary<A, F>::packet(g, x) computes F(g, x) = g * gelu'(x) lane by lane (the GELU
/// derivatives of gelu_math.h), float only.
template <typename A, typename F>
struct VecBinary;

/// g (Phi(x) + x phi(x)), Phi from erfc as in the forward and phi = e^(-x^2/2) / sqrt(2 pi)
/// sharing its exponential, x phi(x) as (x / sqrt(2 pi)) e^(-x^2/2): it flushes to 0
/// (kSubnormalsToZero) where e^(-x^2/2) is below FLT_MIN (x < -13.2, where the derivative is
/// below 8e-38).
template <>
struct VecBinary<float, math::GeluBackward> {
  static constexpr bool kSubnormalsToZero = true;
  static Packet<float> packet(const Packet<float>& g, const Packet<float>& x) {
    const float kInvSqrt2Pi = 0.39894228040143267794f;
    Packet<float> gauss, p;
    half_erfc_abs(x, gauss, p);
    const Packet<float> cdf = cdf_from_half_erfc(x, ei::pmul(gauss, p));
    return ei::pmul(g, ei::pmadd(ei::pmul(x, splat(kInvSqrt2Pi)), gauss, cdf));
  }
};

/// g * d/dx [x/2 (1 + tanh u)] = g (s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)) with
/// s = 1 / (1 + e^-2u): with e = e^-|2u| and r = 1 / (1 + e), s and 1 - s are r and e r (in
/// the order of 2u's sign) and s (1 - s) = e r^2, each without cancellation. e below FLT_MIN
/// flushes to 0 (kSubnormalsToZero), and with it the derivative where |2u| > 87.3, which is
/// below 3e-36 there.
template <>
struct VecBinary<float, math::GeluTanhBackward> {
  static constexpr bool kSubnormalsToZero = true;
  static Packet<float> packet(const Packet<float>& g, const Packet<float>& x) {
    using P = Packet<float>;
    const float kTwoBeta = 2.0f * 0.79788456080286535588f;
    const float kKappa = 0.044715f;
    const P x_sq = ei::pmul(x, x);
    const P two_u = gelu_tanh_2u(x, x_sq);
    const P e = exp_neg_float<false>(abs_clamped(two_u, 104.0f), ei::pzero(x));
    const P r = recip_float(ei::padd(splat(1.0f), e));
    const P er = ei::pmul(e, r);
    const P s = ei::pselect(ei::pcmp_lt(two_u, ei::pzero(x)), er, r);
    const P slope = ei::pmul(ei::pmul(x, ei::pmadd(x_sq, splat(3.0f * kKappa * kTwoBeta), splat(kTwoBeta))),
                             ei::pmul(er, r));
    return ei::pmul(g, ei::padd(s, slope));
  }
};

/// Whether binary formula F has a vector path for element type A.
template <typename A, typename F>
inline constexpr bool has_vec_binary = requires(const Packet<A>& g, const Packet<A>& x) {
  VecBinary<A, F>::packet(g, x);
};

/// Whether formula V (a VecUnary or VecBinary) runs with subnormal results flushed to zero.
template <typename V>
inline constexpr bool flushes_subnormals = requires { requires V::kSubnormalsToZero; };

/// A FlushSubnormalsToZero for the formulas that ask for it, nothing for the others.
template <typename V>
using SubnormalMode = std::conditional_t<flushes_subnormals<V>, FlushSubnormalsToZero, std::monostate>;

/// y[i] = F(x[i]) for i < n through VecUnary<A, F>, a packet at a time (a final partial
/// packet padded with zeros); x and y may be the same array.
template <typename A, typename F>
void apply_unary(const A* x, A* y, int64_t n) {
  [[maybe_unused]] const SubnormalMode<VecUnary<A, F>> subnormal_mode;
  constexpr int64_t kL = kLanes<A>;
  int64_t i = 0;
  for (; i + kL <= n; i += kL) ei::pstoreu(y + i, VecUnary<A, F>::packet(ei::ploadu<Packet<A>>(x + i)));
  if (i < n) {
    alignas(64) A buf[kL] = {};
    const auto m = static_cast<size_t>(n - i);
    std::memcpy(buf, x + i, sizeof(A) * m);
    ei::pstoreu(buf, VecUnary<A, F>::packet(ei::ploadu<Packet<A>>(buf)));
    std::memcpy(y + i, buf, sizeof(A) * m);
  }
}

/// y[i] = F(g[i], x[i]) for i < n through VecBinary<A, F>, a packet at a time; y may be g or x.
template <typename A, typename F>
void apply_binary(const A* g, const A* x, A* y, int64_t n) {
  [[maybe_unused]] const SubnormalMode<VecBinary<A, F>> subnormal_mode;
  constexpr int64_t kL = kLanes<A>;
  int64_t i = 0;
  for (; i + kL <= n; i += kL)
    ei::pstoreu(y + i, VecBinary<A, F>::packet(ei::ploadu<Packet<A>>(g + i), ei::ploadu<Packet<A>>(x + i)));
  if (i < n) {
    alignas(64) A gb[kL] = {}, xb[kL] = {};
    const auto m = static_cast<size_t>(n - i);
    std::memcpy(gb, g + i, sizeof(A) * m);
    std::memcpy(xb, x + i, sizeof(A) * m);
    ei::pstoreu(gb, VecBinary<A, F>::packet(ei::ploadu<Packet<A>>(gb), ei::ploadu<Packet<A>>(xb)));
    std::memcpy(y + i, gb, sizeof(A) * m);
  }
}

}  // namespace kiln::cpu::vec
