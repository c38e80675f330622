// Test harness shared by the suites: random inputs in any dtype, the layouts every op must
// accept (contiguous, transposed, sliced with a step, expanded), float64 index helpers for
// writing independent references, and a closeness check with dtype-appropriate tolerances.
//
// References are computed here, in float64, from the inputs' values as read back with
// to_vector<double>() — never by calling the kernel under test.
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace kiln::testing {

/// The dtypes every floating op is checked in.
inline const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};

/// Relative and absolute tolerance for results stored in `dtype`.
struct Tolerance {
  double rtol, atol;
};
inline Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {1e-10, 1e-12};
    case DType::Float32: return {2e-5, 1e-6};
    case DType::Float16: return {2e-3, 1e-3};
    case DType::BFloat16: return {1.6e-2, 1e-2};
    default: return {0, 0};  // integers and bool compare exactly
  }
}

/// Uniform random values in [lo, hi) as `dtype` (integers: floor of the uniform; bool: > midpoint).
inline Tensor random(const Shape& shape, DType dtype = kFloat32, double lo = -2.0, double hi = 2.0) {
  Tensor u = rand(shape, kFloat64) * (hi - lo) + lo;
  if (dtype == kBool) return u > (lo + hi) / 2;
  if (!is_floating(dtype)) {
    std::vector<double> v = u.to_vector<double>();
    for (double& x : v) x = std::floor(x);
    return from_vector(v, shape).to(dtype);
  }
  return u.to(dtype);
}

/// Random multiples of 1/8 in [-2, 2) (integers in [-16, 16) for integer dtypes): products
/// and short sums of them are exact in every float dtype, so GEMM results compare exactly.
inline Tensor random_eighths(const Shape& shape, DType dtype) {
  std::vector<double> v = random(shape, kInt64, -16, 16).to_vector<double>();
  if (is_floating(dtype))
    for (double& x : v) x *= 0.125;
  return from_vector(v, shape).to(dtype);
}

/// How a test operand is laid out in memory.
enum class Layout { Contiguous, Transposed, Sliced, Expanded };
inline const std::vector<Layout> kLayouts = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded};
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::Expanded: return "expanded";
  }
  return "?";
}

/// A random tensor of `shape` (at least 2-D for Transposed) laid out as `layout`:
/// Transposed has its last two dims swapped in memory, Sliced takes every other element of
/// a wider buffer along the last dim (offset 1), Expanded broadcasts a size-1 first dim.
inline Tensor random_with_layout(const Shape& shape, Layout layout, DType dtype = kFloat32, double lo = -2.0,
                                 double hi = 2.0) {
  switch (layout) {
    case Layout::Contiguous: return random(shape, dtype, lo, hi);
    case Layout::Transposed: {
      REQUIRE(shape.size() >= 2);
      Shape swapped = shape;
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      Tensor t = random(swapped, dtype, lo, hi).transpose(-1, -2);
      if (shape[shape.size() - 1] > 1 && shape[shape.size() - 2] > 1) REQUIRE_FALSE(t.is_contiguous());
      return t;
    }
    case Layout::Sliced: {
      REQUIRE(!shape.empty());
      Shape wide = shape;
      wide.back() = 2 * shape.back() + 1;
      Tensor t = random(wide, dtype, lo, hi).slice(-1, 1, 2 * shape.back() + 1, 2);
      REQUIRE(t.sizes() == shape);
      return t;
    }
    case Layout::Expanded: {
      REQUIRE(!shape.empty());
      Shape one = shape;
      one[0] = 1;
      return random(one, dtype, lo, hi).expand(shape);
    }
  }
  return {};
}

/// Row-major multi-index of flat position `flat` in `shape`.
inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return idx;
}

/// Row-major flat position of `idx` in `shape`.
inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

/// Flat position in an operand of shape `in` of the element that broadcasts to `out_idx`
/// (an index into the broadcast result shape).
inline int64_t broadcast_source(const std::vector<int64_t>& out_idx, const Shape& in) {
  const size_t lead = out_idx.size() - in.size();
  int64_t flat = 0;
  for (size_t d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : out_idx[lead + d]);
  return flat;
}

/// The values of `t` in row-major order as float64.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

/// Checks `actual` against a float64 reference of shape `shape`, within `tol` (NaN matches
/// NaN, equal infinities match). Reports the first mismatch with its index.
inline void check_close(const Tensor& actual, const std::vector<double>& expected, const Shape& shape, Tolerance tol,
                        const std::string& what = "") {
  INFO(what);
  REQUIRE(actual.sizes() == shape);
  const std::vector<double> got = values(actual);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], e = expected[i];
    bool ok;
    if (std::isnan(e)) ok = std::isnan(g);
    else if (std::isinf(e)) ok = g == e;
    else ok = std::abs(g - e) <= tol.atol + tol.rtol * std::abs(e);
    if (!ok) {
      FAIL_CHECK("mismatch at flat index " << i << " (index " << shape_str(unravel(static_cast<int64_t>(i), shape))
                                           << "): got " << g << ", expected " << e << " (rtol " << tol.rtol
                                           << ", atol " << tol.atol << ")");
      return;
    }
  }
}

/// check_close with the tolerance of actual's dtype.
inline void check_close(const Tensor& actual, const std::vector<double>& expected, const Shape& shape,
                        const std::string& what = "") {
  check_close(actual, expected, shape, tolerance(actual.dtype()), what);
}

/// Elementwise float64 reference for a broadcast binary function of two operands.
inline std::vector<double> reference_binary(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  const Shape out = broadcast_shapes(a.sizes(), b.sizes(), "reference");
  const std::vector<double> va = values(a), vb = values(b);
  std::vector<double> r(static_cast<size_t>(shape_numel(out)));
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    const auto idx = unravel(i, out);
    r[i] = f(va[broadcast_source(idx, a.sizes())], vb[broadcast_source(idx, b.sizes())]);
  }
  return r;
}

/// Elementwise float64 reference for a unary function.
inline std::vector<double> reference_unary(const Tensor& a, const std::function<double(double)>& f) {
  std::vector<double> r = values(a);
  for (double& v : r) v = f(v);
  return r;
}

/// Float64 reference of linear(): x [..., in] @ w[out, in]^T + b[out] (b may be undefined),
/// from the tensors' values, as a flat row-major [rows, out] vector.
inline std::vector<double> reference_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::vector<double> vx = values(x), vw = values(w);
  const std::vector<double> vb = b.defined() ? values(b) : std::vector<double>();
  const int64_t out = w.sizes()[0], in = w.sizes()[1], rows = in == 0 ? 0 : x.numel() / in;
  std::vector<double> r(static_cast<size_t>(rows * out));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = vb.empty() ? 0.0 : vb[o];
      for (int64_t k = 0; k < in; ++k) acc += vx[i * in + k] * vw[o * in + k];
      r[i * out + o] = acc;
    }
  return r;
}

/// Infinity and NaN as float64, for references.
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Rounds a float64 value to what storing it in `dtype` gives (for references of
/// low-precision inputs computed exactly, e.g. an identity op).
inline double round_to(double v, DType dtype) { return from_vector<double>({v}).to(dtype).item<double>(); }

/// The message of the kiln::Error f throws ("no error" when it returns; other exceptions propagate).
inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace kiln::testing
