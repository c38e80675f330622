// Float64 references for fused_linear_gelu and its backward, written here with plain loops
// and <cmath> (never the library's GELU functors), shared by the CPU suites and the CUDA
// suite; and the relative norm error the tolerances are stated in.
#pragma once

#include <cmath>
#include <vector>

#include "testing.h"

namespace kiln::testing {

/// GELU of h in float64: exact x Phi(x) or the tanh approximation.
inline double gelu_reference(double h, bool tanh_mode) {
  if (!tanh_mode) return 0.5 * h * (1.0 + std::erf(h / std::sqrt(2.0)));
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * h * (1.0 + std::tanh(c * (h + 0.044715 * h * h * h)));
}

/// d/dh of gelu_reference.
inline double gelu_derivative_reference(double h, bool tanh_mode) {
  if (!tanh_mode)
    return 0.5 * (1.0 + std::erf(h / std::sqrt(2.0))) + h * std::exp(-0.5 * h * h) / std::sqrt(2.0 * M_PI);
  const double c = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(c * (h + 0.044715 * h * h * h));
  return 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * h * h);
}

/// ||got - want|| / ||want|| over all elements (||got - want|| when want is all zeros).
inline double relative_norm_error(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// The pre-activation and the output of fused_linear_gelu(x, w, b), flat [rows, out].
struct FusedReference {
  std::vector<double> pre, out;
};
inline FusedReference fused_reference(const Tensor& x, const Tensor& w, const Tensor& b, bool tanh_mode) {
  const std::vector<double> vx = values(x), vw = values(w);
  const std::vector<double> vb = b.defined() ? values(b) : std::vector<double>();
  const int64_t n = w.sizes()[0], k = w.sizes()[1];
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.sizes()[static_cast<size_t>(d)];
  FusedReference r;
  r.pre.assign(static_cast<size_t>(rows * n), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = vb.empty() ? 0.0 : vb[static_cast<size_t>(j)];
      for (int64_t c = 0; c < k; ++c) acc += vx[static_cast<size_t>(i * k + c)] * vw[static_cast<size_t>(j * k + c)];
      r.pre[static_cast<size_t>(i * n + j)] = acc;
    }
  r.out = r.pre;
  for (double& v : r.out) v = gelu_reference(v, tanh_mode);
  return r;
}

/// The three gradients of fused_linear_gelu for grad g [rows, out], from h = x w^T + b.
struct BackwardReference {
  std::vector<double> input, weight, bias;
};
inline BackwardReference backward_reference(const Tensor& g, const Tensor& x, const Tensor& w,
                                            const std::vector<double>& h, bool tanh_mode) {
  const std::vector<double> vg = values(g), vx = values(x), vw = values(w);
  const int64_t n = w.sizes()[0], k = w.sizes()[1], m = n == 0 ? 0 : static_cast<int64_t>(vg.size()) / n;
  std::vector<double> dh(vg.size());
  for (size_t i = 0; i < dh.size(); ++i) dh[i] = vg[i] * gelu_derivative_reference(h[i], tanh_mode);
  BackwardReference r{std::vector<double>(static_cast<size_t>(m * k)), std::vector<double>(static_cast<size_t>(n * k)),
                      std::vector<double>(static_cast<size_t>(n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double d = dh[static_cast<size_t>(i * n + j)];
      r.bias[static_cast<size_t>(j)] += d;
      for (int64_t c = 0; c < k; ++c) {
        r.input[static_cast<size_t>(i * k + c)] += d * vw[static_cast<size_t>(j * k + c)];
        r.weight[static_cast<size_t>(j * k + c)] += d * vx[static_cast<size_t>(i * k + c)];
      }
    }
  return r;
}

/// The relative norm error each dtype must stay under against the float64 reference: the
/// issue's 1e-5 (float32) and 1e-2 (bfloat16); float16 rounds 8x finer than bfloat16.
inline double norm_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-5;
    case DType::Float16: return 2e-3;
    default: return 1e-2;
  }
}

}  // namespace kiln::testing
