// layer_norm over one and two trailing dims, with and without the affine weight and bias,
// in every float dtype and input layout, against a float64 reference using the biased
// variance (as PyTorch does); plus eps's effect on near-constant rows and the error paths.
#include <cmath>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// float64 layer norm of x's values over the last numel(normalized) elements of each row.
std::vector<double> layer_norm_ref(const Tensor& x, const Shape& normalized, const Tensor& weight, const Tensor& bias,
                                   double eps) {
  const std::vector<double> vx = values(x);
  const std::vector<double> vw = weight.defined() ? values(weight) : std::vector<double>();
  const std::vector<double> vb = bias.defined() ? values(bias) : std::vector<double>();
  const int64_t n = shape_numel(normalized), rows = x.numel() / n;
  std::vector<double> r(vx.size());
  for (int64_t row = 0; row < rows; ++row) {
    const double* xr = vx.data() + row * n;
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= static_cast<double>(n);
    double var = 0;
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(n);  // biased
    for (int64_t i = 0; i < n; ++i) {
      double v = (xr[i] - mean) / std::sqrt(var + eps);
      if (!vw.empty()) v *= vw[i];
      if (!vb.empty()) v += vb[i];
      r[row * n + i] = v;
    }
  }
  return r;
}

}  // namespace

TEST_CASE("layer_norm over the last dim, with and without affine parameters") {
  manual_seed(31);
  for (DType dt : kFloatTypes)
    for (const Shape& shape : std::vector<Shape>{{7}, {4, 7}, {2, 3, 16}, {3, 1, 127}})
      for (int affine = 0; affine < 4; ++affine) {
        const Shape normalized{shape.back()};
        const Tensor x = random(shape, dt, -3, 5);
        const Tensor w = (affine & 1) ? random(normalized, dt, 0.5, 2) : Tensor();
        const Tensor b = (affine & 2) ? random(normalized, dt) : Tensor();
        INFO(dt, " ", shape_str(shape), " weight ", w.defined(), " bias ", b.defined());
        const Tensor y = layer_norm(x, normalized, w, b);
        CHECK(y.dtype() == dt);
        check_close(y, layer_norm_ref(x, normalized, w, b, 1e-5), shape);
      }
}

TEST_CASE("layer_norm over the last two dims") {
  manual_seed(32);
  for (DType dt : kFloatTypes)
    for (int affine = 0; affine < 4; ++affine) {
      const Shape shape{3, 5, 6}, normalized{5, 6};
      const Tensor x = random(shape, dt, -1, 3);
      const Tensor w = (affine & 1) ? random(normalized, dt, -2, 2) : Tensor();
      const Tensor b = (affine & 2) ? random(normalized, dt) : Tensor();
      INFO(dt, " weight ", w.defined(), " bias ", b.defined());
      check_close(layer_norm(x, normalized, w, b), layer_norm_ref(x, normalized, w, b, 1e-5), shape);
      // Normalising the whole tensor: a single row.
      const Tensor whole = layer_norm(x, shape);
      check_close(whole, layer_norm_ref(x, shape, Tensor(), Tensor(), 1e-5), shape);
    }
}

TEST_CASE("layer_norm reads transposed, sliced and expanded inputs and parameters") {
  manual_seed(33);
  for (DType dt : kFloatTypes)
    for (Layout l : kLayouts)
      for (const Shape& normalized : std::vector<Shape>{{9}, {6, 9}}) {
        const Shape shape{4, 6, 9};
        const Tensor x = random_with_layout(shape, l, dt);
        // Strided parameters: every other element of a wider buffer.
        const Tensor w = random_with_layout(normalized, Layout::Sliced, dt, 0.5, 1.5);
        const Tensor b =
            random_with_layout(normalized, normalized.size() == 2 ? Layout::Transposed : Layout::Sliced, dt);
        INFO(dt, " ", layout_name(l), " normalized ", shape_str(normalized));
        check_close(layer_norm(x, normalized, w, b), layer_norm_ref(x, normalized, w, b, 1e-5), shape);
      }
}

TEST_CASE("layer_norm: eps enters the variance") {
  manual_seed(34);
  for (DType dt : kFloatTypes) {
    INFO(dt);
    const Tensor x = random({5, 32}, dt);
    for (double eps : {0.0, 1e-5, 0.5, 4.0}) {
      INFO("eps ", eps);
      check_close(layer_norm(x, {32}, Tensor(), Tensor(), eps), layer_norm_ref(x, {32}, Tensor(), Tensor(), eps),
                  {5, 32});
    }
    // A large eps visibly shrinks the output: |y| <= |x - mean| / sqrt(eps) < 4 / 2.
    const std::vector<double> shrunk = layer_norm(x, {32}, Tensor(), Tensor(), 4.0).to_vector<double>();
    double max_abs = 0;
    for (double v : shrunk) max_abs = std::max(max_abs, std::abs(v));
    CHECK(max_abs < 2.0);
    CHECK(max_abs > 0.1);
  }
  // A constant row has zero variance: eps alone keeps the result finite (zero, plus bias).
  const Tensor c = full({2, 8}, 3.0);
  const Tensor bias = random({8});
  const Tensor y = layer_norm(c, {8}, Tensor(), bias, 1e-5);
  std::vector<double> expect;
  for (int r = 0; r < 2; ++r)
    for (double v : values(bias)) expect.push_back(v);
  check_close(y, expect, {2, 8});
  // No rows at all: an empty result of the input's shape.
  CHECK(layer_norm(random({0, 8}), {8}).sizes() == Shape{0, 8});
}

TEST_CASE("layer_norm output rows have zero mean and unit (biased) variance") {
  // A property check independent of the reference's formula: without weight and bias, each
  // row's mean is 0 and its biased variance is var / (var + eps) ~ 1.
  manual_seed(35);
  const Tensor x = random({6, 200}, kFloat64, -4, 10);
  const std::vector<double> y = layer_norm(x, {200}, Tensor(), Tensor(), 0.0).to_vector<double>();
  for (int r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 200; ++i) m += y[r * 200 + i];
    m /= 200;
    for (int i = 0; i < 200; ++i) v += (y[r * 200 + i] - m) * (y[r * 200 + i] - m);
    v /= 200;
    CHECK(std::abs(m) < 1e-12);
    CHECK(std::abs(v - 1.0) < 1e-12);
  }
}

TEST_CASE("layer_norm errors") {
  manual_seed(36);
  const Tensor x = random({3, 5});
  CHECK_THROWS_WITH_AS(layer_norm(x, {4}),
                       doctest::Contains("layer_norm: input of shape [3, 5] does not end with normalized_shape [4]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(
      layer_norm(x, {2, 3, 5}),
      doctest::Contains("layer_norm: input of shape [3, 5] does not end with normalized_shape [2, 3, 5]"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {}),
                       doctest::Contains("layer_norm: normalized_shape must have at least one dimension"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {5}, random({4})),
                       doctest::Contains("layer_norm: expected weight of shape [5], got [4]"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {3, 5}, random({5})),
                       doctest::Contains("layer_norm: expected weight of shape [3, 5], got [5]"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {5}, random({5}), random({1, 5})),
                       doctest::Contains("layer_norm: expected bias of shape [5], got [1, 5]"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {5}, random({5}, kFloat64)),
                       doctest::Contains("layer_norm: expected weight of dtype float32, got float64"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {5}, Tensor(), random({5}, kFloat16)),
                       doctest::Contains("layer_norm: expected bias of dtype float32, got float16"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(random({3, 5}, kInt64), {5}),
                       doctest::Contains("layer_norm: unsupported dtype int64"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(random({3, 5}, kInt32), {5}),
                       doctest::Contains("layer_norm: unsupported dtype int32"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, {5}, Tensor(), Tensor(), -1.0),
                       doctest::Contains("layer_norm: eps must be non-negative, got -1"), kiln::Error);
  CHECK_THROWS_WITH_AS(layer_norm(Tensor(), {5}),
                       doctest::Contains("layer_norm: argument 'input' is an undefined tensor"), kiln::Error);
}
