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
// Every element goes through the same packet code: data is copied into fixed, aligned blocks
// of kBlock values (a partial block padded with zeros) and evaluated into another, so Eigen
// never peels scalar iterations and an element's result does not depend on where its run
// starts or ends, how the engine chunks the work over threads, or the tensor's layout.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../binary_math.h"
#include "../unary_math.h"

namespace kiln::cpu::vec {

/// Values per evaluated block: 256 bytes, four AVX-512 packets.
template <typename A>
inline constexpr int64_t kBlock = 256 / static_cast<int64_t>(sizeof(A));

/// One block of values, aligned for Eigen's packets.
template <typename A>
using Block = Eigen::Array<A, kBlock<A>, 1>;

/// y = e^x over a block through Eigen's vectorised exp. Eigen's float exp overflows to inf
/// a little below float's true overflow (e^88.4 is finite), so inputs above 87 are
/// recomputed as e^(x - 1) * e (x - 1 is exact there); float's inf/0 limits then match libm's.
template <typename A>
void exp_block(const Block<A>& x, Block<A>& y) {
  y = x.exp();
  if constexpr (std::is_same_v<A, float>) {
    // An OR of the lane comparisons, which the compiler vectorises (a compare and a mask OR;
    // Eigen's any() is a scalar loop, and its NaN-skipping maxCoeff<PropagateNumbers> cost 45%
    // of the whole exp in a probe). A NaN lane compares false, so it cannot hide a lane above 87.
    int high_lanes = 0;
    for (int64_t i = 0; i < kBlock<float>; ++i) high_lanes |= x[i] > 87.0f;
    if (high_lanes != 0) {
      const Block<float> high = (x - 1.0f).exp() * 2.71828182845904523536f;
      for (int64_t i = 0; i < kBlock<float>; ++i)
        if (x[i] > 87.0f) y[i] = high[i];
    }
  }
}

/// erfc(|x| / sqrt 2) / 2 over a block: e^(-x^2 / 2) t P(t) / 2 with t = 1 / (1 + z/2),
/// z = |x| / sqrt 2, and P a degree-8 polynomial fitted here (least squares on the relative
/// error over z in [0, 10], reweighted toward minimax: 4.4e-8; about 3e-7 with float
/// arithmetic). Relative accuracy in the tail, where 1 + erf(x / sqrt 2) would cancel. The
/// exponent is <= 0, so Eigen's exp needs no overflow care; one fused expression, evaluated
/// a packet at a time.
inline void half_erfc_abs_block(const Block<float>& x, Block<float>& out) {
  constexpr float c0 = 0.28208643198013306f, c1 = 0.2823752462863922f, c2 = 0.24310407042503357f,
                  c3 = 0.20268666744232178f, c4 = -0.026627760380506516f, c5 = 0.2780740261077881f,
                  c6 = -0.487209290266037f, c7 = 0.28458115458488464f, c8 = -0.05907056853175163f;
  const Block<float> t = 1.0f / (1.0f + (0.5f * 0.70710678118654752440f) * x.abs());
  const auto p = c0 + t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * (c5 + t * (c6 + t * (c7 + t * c8)))))));
  out = (-0.5f * x * x).exp() * 0.5f * t * p;
}

/// VecUnary<A, F>::block(x, y) computes y = F(x) over one block; left undefined (no vector
/// path) for the formulas and types not listed.
template <typename A, typename F>
struct VecUnary;

template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Exp> {
  static void block(const Block<A>& x, Block<A>& y) { exp_block<A>(x, y); }
};

/// 1 / (1 + e^-x), as math::Sigmoid.
template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Sigmoid> {
  static void block(const Block<A>& x, Block<A>& y) {
    Block<A> e;
    exp_block<A>(-x, e);
    y = A(1) / (A(1) + e);
  }
};

/// x / (1 + e^-x), as math::Silu.
template <typename A>
  requires std::is_floating_point_v<A>
struct VecUnary<A, math::Silu> {
  static void block(const Block<A>& x, Block<A>& y) {
    Block<A> e;
    exp_block<A>(-x, e);
    y = x / (A(1) + e);
  }
};

/// Eigen's float tanh (a rational approximation; its double tanh is not vectorised).
template <>
struct VecUnary<float, math::Tanh> {
  static void block(const Block<float>& x, Block<float>& y) { y = x.tanh(); }
};

/// x Phi(x) = x/2 erfc(-x / sqrt 2): x (1 - E/2) for x >= 0 and x E/2 below, E = erfc(|x| / sqrt 2),
/// which keeps the negative tail's relative accuracy (x/2 (1 + erf) cancels there).
template <>
struct VecUnary<float, math::Gelu> {
  static void block(const Block<float>& x, Block<float>& y) {
    Block<float> half;
    half_erfc_abs_block(x, half);
    for (int64_t i = 0; i < kBlock<float>; ++i) y[i] = x[i] < 0.0f ? x[i] * half[i] : x[i] * (1.0f - half[i]);
  }
};

/// x/2 (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed as x / (1 + e^(-2u)) (the
/// same function: 1 + tanh u = 2 / (1 + e^-2u)) so neither tail cancels.
template <>
struct VecUnary<float, math::GeluTanh> {
  static void block(const Block<float>& x, Block<float>& y) {
    const float kMinus2Sqrt2OverPi = -2.0f * 0.79788456080286535588f;
    const float kCoeff = 0.044715f;
    Block<float> e;
    exp_block<float>(kMinus2Sqrt2OverPi * (x + kCoeff * x * x * x), e);
    y = x / (1.0f + e);
  }
};

/// Whether unary formula F has a vector path for element type A.
template <typename A, typename F>
inline constexpr bool has_vec_unary = requires(const Block<A>& x, Block<A>& y) { VecUnary<A, F>::block(x, y); };

/// VecBinary<A, F>::block(g, x, y) computes y = F(g, x) = g * gelu'(x) over one block (the
/// GELU derivatives of gelu_math.h), float only.
template <typename A, typename F>
struct VecBinary;

/// g (Phi(x) + x phi(x)), Phi from erfc as in the forward and phi = e^(-x^2/2) / sqrt(2 pi)
/// sharing its exponential.
template <>
struct VecBinary<float, math::GeluBackward> {
  static void block(const Block<float>& g, const Block<float>& x, Block<float>& y) {
    const float kInvSqrt2Pi = 0.39894228040143267794f;
    Block<float> half;
    half_erfc_abs_block(x, half);
    const Block<float> pdf = (-0.5f * x * x).exp() * kInvSqrt2Pi;
    for (int64_t i = 0; i < kBlock<float>; ++i) {
      const float cdf = x[i] < 0.0f ? half[i] : 1.0f - half[i];
      y[i] = g[i] * (cdf + x[i] * pdf[i]);
    }
  }
};

/// g * d/dx [x/2 (1 + tanh u)] = g (s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)) with
/// s = (1 + tanh u) / 2 = 1 / (1 + e^-2u) and 1 - s = 1 / (1 + e^2u), each without cancellation.
template <>
struct VecBinary<float, math::GeluTanhBackward> {
  static void block(const Block<float>& g, const Block<float>& x, Block<float>& y) {
    const float kBeta = 0.79788456080286535588f;
    const float kKappa = 0.044715f;
    const Block<float> x_sq = x * x;
    Block<float> e;
    exp_block<float>((-2.0f * kBeta) * (x + kKappa * x_sq * x), e);
    const Block<float> s = 1.0f / (1.0f + e);
    const Block<float> s_rest = 1.0f / (1.0f + 1.0f / e);  // 1 - s; e = 0 gives 0, e = inf gives 1
    y = g * (s + (2.0f * x) * (s * s_rest) * kBeta * (1.0f + (3.0f * kKappa) * x_sq));
  }
};

/// Whether binary formula F has a vector path for element type A.
template <typename A, typename F>
inline constexpr bool has_vec_binary = requires(const Block<A>& g, const Block<A>& x, Block<A>& y) {
  VecBinary<A, F>::block(g, x, y);
};

/// y[i] = F(x[i]) for i < n through VecUnary<A, F>, kBlock values at a time (a partial block
/// padded with zeros); x and y may be the same array.
template <typename A, typename F>
void apply_unary(const A* x, A* y, int64_t n) {
  constexpr int64_t kB = kBlock<A>;
  Block<A> in, out;
  int64_t i = 0;
  for (; i + kB <= n; i += kB) {  // fixed-size copies: vector moves
    std::memcpy(in.data(), x + i, sizeof(in));
    VecUnary<A, F>::block(in, out);
    std::memcpy(y + i, out.data(), sizeof(out));
  }
  if (i < n) {
    const auto m = static_cast<size_t>(n - i);
    in.setZero();
    std::memcpy(in.data(), x + i, sizeof(A) * m);
    VecUnary<A, F>::block(in, out);
    std::memcpy(y + i, out.data(), sizeof(A) * m);
  }
}

/// y[i] = F(g[i], x[i]) for i < n through VecBinary<A, F>, kBlock values at a time; y may be
/// g or x.
template <typename A, typename F>
void apply_binary(const A* g, const A* x, A* y, int64_t n) {
  constexpr int64_t kB = kBlock<A>;
  Block<A> gb, xb, out;
  int64_t i = 0;
  for (; i + kB <= n; i += kB) {
    std::memcpy(gb.data(), g + i, sizeof(gb));
    std::memcpy(xb.data(), x + i, sizeof(xb));
    VecBinary<A, F>::block(gb, xb, out);
    std::memcpy(y + i, out.data(), sizeof(out));
  }
  if (i < n) {
    const auto m = static_cast<size_t>(n - i);
    gb.setZero();
    xb.setZero();
    std::memcpy(gb.data(), g + i, sizeof(A) * m);
    std::memcpy(xb.data(), x + i, sizeof(A) * m);
    VecBinary<A, F>::block(gb, xb, out);
    std::memcpy(y + i, out.data(), sizeof(A) * m);
  }
}

}  // namespace kiln::cpu::vec
