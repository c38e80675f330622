// Vectorised CPU versions of the transcendental unary formulas of unary_math.h (exp, tanh,
// sigmoid, silu, exact and tanh GELU) and of the GELU derivatives (gelu_math.h), instead of one
// scalar libm call per element. Built on Eigen's packet math: its vectorised exp (float and
// double) and tanh (float). CPU-only: the CUDA kernels keep unary_math.h's functors.
//
// exp, sigmoid, silu and tanh are the scalar functors' expressions. The GELUs are the same
// functions written so their tails keep relative accuracy: exact GELU through an erfc
// (x/2 (1 + erf) cancels for negative x), tanh GELU as x / (1 + e^-2u). Their NaN, Inf and
// signed-zero results are the scalar formulas'; bench/cpu_math_accuracy prints the errors
// against float64 over a dense sweep, and tests/ops/test_vec_math.cpp holds them there.
//
// Every element goes through the same packet code, one Eigen packet (16 floats with AVX-512)
// at a time, loaded and stored straight from the arrays; only a final partial packet is
// padded with zeros in a small buffer. Packet operations are lane-wise, so an element's result
// does not depend on where its run starts or ends, how the engine chunks the work over
// threads, or the tensor's layout. (Before, every 64 values were copied into an aligned block
// and evaluated as Eigen array expressions; the copies cost ~40% of the exact GELU's time in a
// probe, bench/cpu_elementwise.)
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

/// e^x through Eigen's vectorised exp. Eigen's float exp overflows to inf a little below
/// float's true overflow (e^88.4 is finite), so lanes above 87 are recomputed as e^(x - 1) * e
/// (x - 1 is exact there); float's inf/0 limits then match libm's. A NaN lane compares false,
/// so it cannot hide a lane above 87.
template <typename A>
inline Packet<A> exp_packet(const Packet<A>& x) {
  Packet<A> y = ei::pexp(x);
  if constexpr (std::is_same_v<A, float>) {
    const Packet<A> high = ei::pcmp_lt(splat<A>(87.0f), x);
    if (ei::predux_any(high)) [[unlikely]]
      y = ei::pselect(high, ei::pmul(ei::pexp(ei::psub(x, splat<A>(1.0f))), splat<A>(2.71828182845904523536f)), y);
  }
  return y;
}

/// erfc(|x| / sqrt 2) / 2: e^(-x^2 / 2) t P(t) / 2 with t = 1 / (1 + z/2), z = |x| / sqrt 2,
/// and P a degree-8 polynomial fitted here (least squares on the relative error over z in
/// [0, 10], reweighted toward minimax: 4.4e-8; about 3e-7 with float arithmetic). Relative
/// accuracy in the tail, where 1 + erf(x / sqrt 2) would cancel. The exponent is <= 0, so
/// Eigen's exp needs no overflow care. Also returns e^(-x^2 / 2) in `gauss` (the GELU
/// derivative's density shares it).
inline Packet<float> half_erfc_abs(const Packet<float>& x, Packet<float>& gauss) {
  constexpr float c0 = 0.28208643198013306f, c1 = 0.2823752462863922f, c2 = 0.24310407042503357f,
                  c3 = 0.20268666744232178f, c4 = -0.026627760380506516f, c5 = 0.2780740261077881f,
                  c6 = -0.487209290266037f, c7 = 0.28458115458488464f, c8 = -0.05907056853175163f;
  using P = Packet<float>;
  const P one = splat(1.0f);
  const P t = ei::pdiv(one, ei::pmadd(splat(0.5f * 0.70710678118654752440f), ei::pabs(x), one));
  P p = splat(c8);
  for (const float c : {c7, c6, c5, c4, c3, c2, c1, c0}) p = ei::pmadd(p, t, splat(c));
  gauss = ei::pexp(ei::pmul(ei::pmul(splat(-0.5f), x), x));
  return ei::pmul(ei::pmul(ei::pmul(gauss, splat(0.5f)), t), p);
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

/// 1 / (1 + e^-x), as math::Sigmoid.
template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Sigmoid> {
  static Packet<A> packet(const Packet<A>& x) {
    const Packet<A> one = splat<A>(1);
    return ei::pdiv(one, ei::padd(one, exp_packet<A>(ei::pnegate(x))));
  }
};

/// x / (1 + e^-x), as math::Silu.
template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Silu> {
  static Packet<A> packet(const Packet<A>& x) {
    return ei::pdiv(x, ei::padd(splat<A>(1), exp_packet<A>(ei::pnegate(x))));
  }
};

/// Eigen's float tanh (a rational approximation; its double tanh is not vectorised).
template <>
struct VecUnary<float, math::Tanh> {
  static Packet<float> packet(const Packet<float>& x) { return ei::ptanh(x); }
};

/// x Phi(x) = x/2 erfc(-x / sqrt 2): x (1 - E/2) for x >= 0 and x E/2 below, E = erfc(|x| / sqrt 2),
/// which keeps the negative tail's relative accuracy (x/2 (1 + erf) cancels there).
template <>
struct VecUnary<float, math::Gelu> {
  static Packet<float> packet(const Packet<float>& x) {
    Packet<float> gauss;
    const Packet<float> half = half_erfc_abs(x, gauss);
    return ei::pselect(ei::pcmp_lt(x, ei::pzero(x)), ei::pmul(x, half), ei::pmul(x, ei::psub(splat(1.0f), half)));
  }
};

/// x/2 (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed as x / (1 + e^(-2u)) (the
/// same function: 1 + tanh u = 2 / (1 + e^-2u)) so neither tail cancels.
template <>
struct VecUnary<float, math::GeluTanh> {
  static Packet<float> packet(const Packet<float>& x) {
    const float kMinus2Sqrt2OverPi = -2.0f * 0.79788456080286535588f;
    const Packet<float> cube = ei::pmul(ei::pmul(splat(0.044715f), x), x);
    const Packet<float> e = exp_packet<float>(ei::pmul(splat(kMinus2Sqrt2OverPi), ei::pmadd(cube, x, x)));
    return ei::pdiv(x, ei::padd(splat(1.0f), e));
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
/// sharing its exponential.
template <>
struct VecBinary<float, math::GeluBackward> {
  static Packet<float> packet(const Packet<float>& g, const Packet<float>& x) {
    const float kInvSqrt2Pi = 0.39894228040143267794f;
    Packet<float> gauss;
    const Packet<float> half = half_erfc_abs(x, gauss);
    const Packet<float> cdf = ei::pselect(ei::pcmp_lt(x, ei::pzero(x)), half, ei::psub(splat(1.0f), half));
    return ei::pmul(g, ei::pmadd(x, ei::pmul(gauss, splat(kInvSqrt2Pi)), cdf));
  }
};

/// g * d/dx [x/2 (1 + tanh u)] = g (s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)) with
/// s = (1 + tanh u) / 2 = 1 / (1 + e^-2u) and 1 - s = 1 / (1 + e^2u), each without cancellation.
template <>
struct VecBinary<float, math::GeluTanhBackward> {
  static Packet<float> packet(const Packet<float>& g, const Packet<float>& x) {
    using P = Packet<float>;
    const float kBeta = 0.79788456080286535588f;
    const float kKappa = 0.044715f;
    const P one = splat(1.0f);
    const P x_sq = ei::pmul(x, x);
    const P e = exp_packet<float>(ei::pmul(splat(-2.0f * kBeta), ei::pmadd(ei::pmul(splat(kKappa), x_sq), x, x)));
    const P s = ei::pdiv(one, ei::padd(one, e));
    const P s_rest = ei::pdiv(one, ei::padd(one, ei::pdiv(one, e)));  // 1 - s; e = 0 gives 0, e = inf gives 1
    const P slope = ei::pmul(ei::pmul(ei::pmul(ei::pmul(splat(2.0f), x), ei::pmul(s, s_rest)), splat(kBeta)),
                             ei::pmadd(splat(3.0f * kKappa), x_sq, one));
    return ei::pmul(g, ei::padd(s, slope));
  }
};

/// Whether binary formula F has a vector path for element type A.
template <typename A, typename F>
inline constexpr bool has_vec_binary = requires(const Packet<A>& g, const Packet<A>& x) {
  VecBinary<A, F>::packet(g, x);
};

/// y[i] = F(x[i]) for i < n through VecUnary<A, F>, a packet at a time (a final partial
/// packet padded with zeros); x and y may be the same array.
template <typename A, typename F>
void apply_unary(const A* x, A* y, int64_t n) {
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
