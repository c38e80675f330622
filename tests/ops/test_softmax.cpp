// softmax and log_softmax against float64 references computed here row by row: every dim
// (negative too), float dtype and layout, normalisation, stability at large magnitudes,
// -inf and NaN entries, 0-dim and zero-size inputs, and the error paths.
#include <cmath>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Float64 softmax (or log_softmax) of x's values along `dim` (non-negative), with the max
// subtracted so large inputs stay finite. A row containing NaN is all NaN.
std::vector<double> softmax_ref(const Tensor& x, int64_t dim, bool log) {
  const Shape& shape = x.sizes();
  const std::vector<double> v = values(x);
  std::vector<double> r(v.size());
  if (shape.empty()) {  // a 0-dim tensor is one row of one element
    if (!v.empty()) r[0] = std::isnan(v[0]) ? kNaN : (log ? 0.0 : 1.0);
    return r;
  }
  const size_t d = static_cast<size_t>(dim);
  Shape outer = shape;
  outer[d] = 1;
  for (int64_t o = 0; o < shape_numel(outer); ++o) {
    std::vector<int64_t> idx = unravel(o, outer);
    std::vector<size_t> pos;
    for (int64_t k = 0; k < shape[d]; ++k) {
      idx[d] = k;
      pos.push_back(static_cast<size_t>(ravel(idx, shape)));
    }
    double m = -kInf;
    bool nan = false;
    for (size_t p : pos) {
      nan = nan || std::isnan(v[p]);
      m = std::max(m, v[p]);
    }
    double total = 0;
    for (size_t p : pos) total += std::exp(v[p] - m);
    for (size_t p : pos)
      r[p] = nan ? kNaN : log ? (v[p] - m) - std::log(total) : std::exp(v[p] - m) / total;
  }
  return r;
}

}  // namespace

TEST_CASE("softmax and log_softmax match float64 references along every dim, dtype and layout") {
  manual_seed(501);
  const Shape shape{3, 4, 5};
  for (DType dtype : kFloatTypes) {
    for (Layout layout : kLayouts) {
      const Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
      for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(layout_name(layout));
        CAPTURE(dim);
        const int64_t d = dim < 0 ? dim + 3 : dim;
        const Tensor p = softmax(x, dim), lp = log_softmax(x, dim);
        CHECK(p.dtype() == dtype);
        CHECK(lp.dtype() == dtype);
        check_close(p, softmax_ref(x, d, false), shape, "softmax");
        check_close(lp, softmax_ref(x, d, true), shape, "log_softmax");
      }
    }
  }
}

TEST_CASE("softmax rows sum to one and log_softmax rows log-sum-exp to zero") {
  manual_seed(502);
  for (DType dtype : kFloatTypes) {
    for (int64_t n : {1, 7, 127, 1000}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(n);
      const Tensor x = random_with_layout({3, n}, Layout::Sliced, dtype, -5, 5);
      const std::vector<double> p = values(softmax(x, 1)), lp = values(log_softmax(x, 1));
      const std::vector<double> lp_ref = softmax_ref(x, 1, true);
      const Tolerance tol = tolerance(dtype);
      for (int64_t r = 0; r < 3; ++r) {
        // Each stored probability is off by at most its own rounding, so the row's total is
        // off by at most the dtype's relative rounding of 1.
        double total = 0, total_from_log = 0, log_bound = 0;
        for (int64_t i = 0; i < n; ++i) {
          const size_t k = static_cast<size_t>(r * n + i);
          CHECK(p[k] >= 0);
          CHECK(p[k] <= 1);
          total += p[k];
          total_from_log += std::exp(lp[k]);
          // A log-probability within atol + rtol * |lp| of the truth moves exp(lp) by at most
          // that factor: the bound grows with |lp|, as 16-bit logs of small probabilities
          // are coarse.
          log_bound += std::exp(lp_ref[k]) * std::expm1(tol.atol + tol.rtol * std::abs(lp_ref[k]));
        }
        CHECK(std::abs(total - 1) <= tol.rtol + tol.atol);
        CHECK(std::abs(total_from_log - 1) <= log_bound);
      }
      check_close(softmax(x, -1), softmax_ref(x, 1, false), {3, n}, "softmax");
      check_close(log_softmax(x, -1), softmax_ref(x, 1, true), {3, n}, "log_softmax");
    }
  }
}

TEST_CASE("large inputs do not overflow") {
  const Tensor x = from_vector<double>({1000, -1000, 996, 0, /**/ 1000, 1001, 1002, 1003, /**/ -1000, -1001, -1002,
                                        -1003},
                                       {3, 4});
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor t = x.to(dtype);
    const Tensor p = softmax(t, 1), lp = log_softmax(t, 1);
    for (double v : values(p)) CHECK(std::isfinite(v));
    for (double v : values(lp)) CHECK(std::isfinite(v));
    check_close(p, softmax_ref(t, 1, false), {3, 4}, "softmax");
    check_close(lp, softmax_ref(t, 1, true), {3, 4}, "log_softmax");
    // The first row is dominated by 1000 and 996 (exact in every dtype): 1 / (1 + e^-4) and
    // e^-4 / (1 + e^-4).
    const std::vector<double> pv = values(p);
    const double q = std::exp(-4.0);
    const Tolerance tol = tolerance(dtype);
    CHECK(std::abs(pv[0] - 1 / (1 + q)) <= tol.atol + tol.rtol / (1 + q));
    CHECK(std::abs(pv[2] - q / (1 + q)) <= tol.atol + tol.rtol * q / (1 + q));
  }
  // Along dim 0 too (a strided walk).
  check_close(softmax(x, 0), softmax_ref(x, 0, false), {3, 4}, "dim 0");
}

TEST_CASE("-inf entries get probability zero; an all -inf row and a NaN row give NaN") {
  const Tensor x = from_vector<double>({0, -kInf, 1, -kInf, /**/ -kInf, -kInf, -kInf, -kInf, /**/ 2, kNaN, 0, 1,
                                        /**/ 0.5, 0.5, 0.5, 0.5},
                                       {4, 4});
  const double e = std::exp(1.0);
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor t = x.to(dtype);
    check_close(softmax(t, 1),
                {1 / (1 + e), 0, e / (1 + e), 0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0.25, 0.25, 0.25, 0.25},
                {4, 4}, "softmax");
    check_close(log_softmax(t, 1),
                {-std::log(1 + e), -kInf, 1 - std::log(1 + e), -kInf, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN,
                 -std::log(4.0), -std::log(4.0), -std::log(4.0), -std::log(4.0)},
                {4, 4}, "log_softmax");
    // Column-wise, the NaN poisons only its own column.
    const std::vector<double> cols = values(softmax(t, 0));
    CHECK(std::isnan(cols[1]));
    CHECK_FALSE(std::isnan(cols[0]));
    CHECK_FALSE(std::isnan(cols[3]));
  }
}

TEST_CASE("an +inf entry makes its row NaN (inf - inf), as in PyTorch") {
  const Tensor x = from_vector<double>({kInf, 1, 2}, {3});
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    for (double v : values(softmax(x.to(dtype), 0))) CHECK(std::isnan(v));
  }
}

TEST_CASE("softmax of 0-dim and zero-size tensors") {
  manual_seed(503);
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor s = random({}, dtype, -5, 5);
    for (int64_t dim : {0, -1}) {
      const Tensor p = softmax(s, dim), lp = log_softmax(s, dim);
      CHECK(p.dim() == 0);
      CHECK(p.item<double>() == 1.0);
      CHECK(lp.item<double>() == 0.0);
    }
    CHECK_THROWS_WITH_AS(softmax(s, 1), doctest::Contains("softmax: dim 1 is out of range"), kiln::Error);
    CHECK_THROWS_WITH_AS(log_softmax(s, -2), doctest::Contains("log_softmax:"), kiln::Error);
    for (const Shape& shape : {Shape{0}, Shape{0, 4}, Shape{4, 0}, Shape{2, 0, 3}}) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        CAPTURE(shape_str(shape));
        CAPTURE(dim);
        const Tensor p = softmax(zeros(shape, dtype), dim), lp = log_softmax(zeros(shape, dtype), dim);
        CHECK(p.sizes() == shape);
        CHECK(lp.sizes() == shape);
        CHECK(p.dtype() == dtype);
      }
    }
    // A length-1 dim: every entry is its own row.
    const Tensor col = random({5, 1}, dtype);
    check_close(softmax(col, 1), std::vector<double>(5, 1.0), {5, 1}, "softmax of singletons");
    check_close(log_softmax(col, 1), std::vector<double>(5, 0.0), {5, 1}, "log_softmax of singletons");
  }
}

TEST_CASE("softmax errors: integer inputs, dims out of range, undefined tensors") {
  for (DType dtype : {kInt64, kInt32, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = random({2, 3}, dtype, -3, 3);
    CHECK_THROWS_WITH_AS(softmax(x, 1), doctest::Contains("softmax: unsupported dtype"), kiln::Error);
    CHECK_THROWS_WITH_AS(log_softmax(x, 0), doctest::Contains("log_softmax: unsupported dtype"), kiln::Error);
  }
  const Tensor x = random({2, 3});
  CHECK_THROWS_WITH_AS(softmax(x, 2), doctest::Contains("softmax: dim 2 is out of range"), kiln::Error);
  CHECK_THROWS_WITH_AS(softmax(x, -3), doctest::Contains("softmax:"), kiln::Error);
  CHECK_THROWS_WITH_AS(log_softmax(x, 5), doctest::Contains("log_softmax: dim 5"), kiln::Error);
  CHECK_THROWS_WITH_AS(softmax(Tensor(), 0), doctest::Contains("softmax: argument 'input'"), kiln::Error);
  CHECK_THROWS_WITH_AS(log_softmax(Tensor(), 0), doctest::Contains("log_softmax:"), kiln::Error);
}
