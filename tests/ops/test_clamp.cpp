// clamp, clamp_, clamp_min and clamp_max against a float64 reference (the element or the
// bound rounded to the dtype, so results compare exactly): every numeric dtype and layout,
// PyTorch's promotion of integer tensors with floating bounds, NaN and infinities, min > max,
// zero-size and 0-dim inputs, and the error paths.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::vector<DType> kNumericTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32};

// The reference clamp: the same two selects PyTorch uses, in float64, bounds as stored.
std::vector<double> reference_clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  return reference_unary(x, [=](double v) {
    if (lo) v = v < *lo ? *lo : v;
    if (hi) v = *hi < v ? *hi : v;
    return v;
  });
}

Tolerance exact() { return {0, 0}; }

}  // namespace

TEST_CASE("clamp, clamp_min and clamp_max match the reference in every numeric dtype and layout") {
  manual_seed(401);
  const Shape shape{3, 5, 7};
  for (DType dtype : kNumericTypes) {
    for (Layout layout : kLayouts) {
      CAPTURE(dtype_name(dtype));
      INFO("layout: " << std::string(layout_name(layout)));
      const Tensor x = random_with_layout(shape, layout, dtype, -4, 4);
      const std::vector<double> before = values(x);
      // Integer tensors take integer bounds (keeping their dtype); float ones take bounds that
      // are not representable in 16 bits, rounded to the dtype before comparing.
      const bool fl = is_floating(dtype);
      const Scalar lo = fl ? Scalar(-1.3) : Scalar(-2), hi = fl ? Scalar(1.7) : Scalar(2);
      const double lo_d = round_to(lo.to_double(), dtype), hi_d = round_to(hi.to_double(), dtype);
      Tensor y = clamp(x, lo, hi);
      CHECK(y.dtype() == dtype);
      check_close(y, reference_clamp(x, lo_d, hi_d), shape, exact(), "clamp");
      check_close(clamp(x, lo), reference_clamp(x, lo_d, std::nullopt), shape, exact(), "clamp min only");
      check_close(clamp(x, std::nullopt, hi), reference_clamp(x, std::nullopt, hi_d), shape, exact(), "clamp max only");
      check_close(clamp_min(x, lo), reference_clamp(x, lo_d, std::nullopt), shape, exact(), "clamp_min");
      check_close(clamp_max(x, hi), reference_clamp(x, std::nullopt, hi_d), shape, exact(), "clamp_max");
      CHECK(values(x) == before);
      if (layout != Layout::Expanded) {
        Tensor z = x.clone();
        if (layout == Layout::Transposed) z = x.transpose(-1, -2).contiguous().transpose(-1, -2);  // in place, strided
        Tensor& same = clamp_(z, lo, hi);
        CHECK(same.is_same(z));
        check_close(z, reference_clamp(x, lo_d, hi_d), shape, exact(), "clamp_");
      }
    }
  }
}

TEST_CASE("clamp promotes integer and bool tensors with floating bounds, as PyTorch's result_type") {
  const Tensor i = tensor({-3, 0, 5});
  const Tensor f = clamp(i, 0.5);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{0.5f, 0.5f, 5.0f});
  CHECK(clamp(i, -1, 2).dtype() == kInt64);
  CHECK(clamp(i, -1, 2).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 2});
  CHECK(clamp(tensor({-3, 7}, kInt32), 0, 4).dtype() == kInt32);  // numbers don't widen int32
  CHECK(clamp_max(tensor({true, false}), 0).dtype() == kInt64);   // bool with an int bound: int64
  CHECK(clamp_max(tensor({true, false}), 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(clamp(tensor({1.0, 5.0}, kFloat16), 2).dtype() == kFloat16);  // floating tensors keep their dtype
}

TEST_CASE("clamp: NaN elements stay NaN, NaN bounds clamp nothing, infinities, min > max") {
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = tensor({kNaN, -kInf, kInf, -2.0, 0.5, 3.0}, dtype);
    check_close(clamp(x, -1, 1), {kNaN, -1, 1, -1, 0.5, 1}, {6}, exact(), "NaN propagates");
    check_close(clamp(x, kNaN, 1), {kNaN, -kInf, 1, -2, 0.5, 1}, {6}, exact(), "NaN min");
    check_close(clamp(x, -1, kNaN), {kNaN, -1, kInf, -1, 0.5, 3}, {6}, exact(), "NaN max");
    check_close(clamp(x, 2, 1), {kNaN, 1, 1, 1, 1, 1}, {6}, exact(), "min > max gives max");
    check_close(clamp(x, -kInf, kInf), {kNaN, -kInf, kInf, -2, 0.5, 3}, {6}, exact(), "infinite bounds");
  }
  // Extreme integers: the bounds are compared exactly, without a detour through double.
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(clamp(tensor({big, big - 1, int64_t{0}}), big - 1).to_vector<int64_t>() ==
        std::vector<int64_t>{big, big - 1, big - 1});
}

TEST_CASE("clamp of zero-size and 0-dim tensors") {
  CHECK(clamp(zeros({0, 3}), 0, 1).sizes() == Shape{0, 3});
  CHECK(clamp(tensor(5.0), 0, 1).dim() == 0);
  CHECK(clamp(tensor(5.0), 0, 1).item<double>() == 1.0);
}

TEST_CASE("clamp errors: no bound, bool, overflowing bounds, in-place promotion, expanded, undefined") {
  const Tensor x = ones({3});
  CHECK_THROWS_WITH_AS(clamp(x, std::nullopt, std::nullopt), "clamp: at least one of 'min' or 'max' must be given",
                       Error);
  CHECK_THROWS_WITH_AS(clamp(tensor({true}), false, true),
                       "clamp: unsupported dtype bool (supported: int32, int64, float16, bfloat16, float32, float64)",
                       Error);
  CHECK_THROWS_WITH_AS(clamp(tensor({1}, kInt32), int64_t{1} << 40),
                       "clamp: min 1099511627776 cannot be converted to int32 without overflow", Error);
  CHECK_THROWS_WITH_AS(clamp_max(tensor({1}, kInt32), -(int64_t{1} << 33)),
                       "clamp_max: max -8589934592 cannot be converted to int32 without overflow", Error);
  Tensor i = tensor({1, 2});
  CHECK_THROWS_WITH_AS(clamp_(i, 0.5), doctest::Contains("clamp_: result type float32 can't be cast to the desired "
                                                          "output type int64"),
                       Error);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  Tensor e = ones({1, 3}).expand({2, 3});
  CHECK_THROWS_WITH_AS(clamp_(e, 0), doctest::Contains("clamp_: the tensor (shape [2, 3], strides [0, 1]) has elements "
                                                       "that share memory"),
                       Error);
  CHECK_THROWS_WITH_AS(clamp_min(Tensor(), 0), "clamp_min: argument 'input' is an undefined tensor", Error);
}

TEST_CASE("clamp method forms equal the free functions") {
  manual_seed(402);
  const Tensor x = random({4, 5});
  CHECK(equal(x.clamp(-0.5, 0.5), clamp(x, -0.5, 0.5)));
  CHECK(equal(x.clamp(0.1), clamp(x, 0.1)));
  CHECK(equal(x.clamp({}, 0.2), clamp(x, std::nullopt, 0.2)));
  CHECK(equal(x.clamp_min(0.3), clamp_min(x, 0.3)));
  CHECK(equal(x.clamp_max(-0.3), clamp_max(x, -0.3)));
  Tensor a = x.clone();
  CHECK(&a.clamp_(-0.1, 0.1) == &a);
  CHECK(equal(a, clamp(x, -0.1, 0.1)));
}
