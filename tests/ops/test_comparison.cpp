// Comparisons (eq, ne, lt, le, gt, ge and their operators), where(), equal() and allclose()
// against references evaluated here on the inputs' float64 values: bool results, promotion
// and broadcasting of operands, NaN and infinity semantics, and the error paths.
#include <cmath>
#include <functional>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct CompareCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn, op;       // function and operator forms
  std::function<Tensor(const Tensor&, const Scalar&)> fn_s, op_s;   // with a number
  std::function<bool(double, double)> ref;
};

const std::vector<CompareCase>& cases() {
  using T = const Tensor&;
  using S = const Scalar&;
  static const std::vector<CompareCase> c = {
      {"eq", [](T a, T b) { return eq(a, b); }, [](T a, T b) { return a == b; }, [](T a, S b) { return eq(a, b); },
       [](T a, S b) { return a == b; }, [](double x, double y) { return x == y; }},
      {"ne", [](T a, T b) { return ne(a, b); }, [](T a, T b) { return a != b; }, [](T a, S b) { return ne(a, b); },
       [](T a, S b) { return a != b; }, [](double x, double y) { return x != y; }},
      {"lt", [](T a, T b) { return lt(a, b); }, [](T a, T b) { return a < b; }, [](T a, S b) { return lt(a, b); },
       [](T a, S b) { return a < b; }, [](double x, double y) { return x < y; }},
      {"le", [](T a, T b) { return le(a, b); }, [](T a, T b) { return a <= b; }, [](T a, S b) { return le(a, b); },
       [](T a, S b) { return a <= b; }, [](double x, double y) { return x <= y; }},
      {"gt", [](T a, T b) { return gt(a, b); }, [](T a, T b) { return a > b; }, [](T a, S b) { return gt(a, b); },
       [](T a, S b) { return a > b; }, [](double x, double y) { return x > y; }},
      {"ge", [](T a, T b) { return ge(a, b); }, [](T a, T b) { return a >= b; }, [](T a, S b) { return ge(a, b); },
       [](T a, S b) { return a >= b; }, [](double x, double y) { return x >= y; }},
  };
  return c;
}

// Random values on a coarse grid (multiples of 0.5 in [-3, 3); integers for integer dtypes)
// laid out as random_with_layout() does, so equal pairs are common.
Tensor grid(const Shape& shape, DType dtype, Layout layout = Layout::Contiguous) {
  const auto make = [dtype](const Shape& s) {
    std::vector<double> v = values(random(s, kInt64, -6, 6));
    for (double& x : v) x = is_floating(dtype) ? x / 2 : std::trunc(x / 2);
    return from_vector(v, s).to(dtype);
  };
  Shape s = shape;
  switch (layout) {
    case Layout::Contiguous: return make(shape);
    case Layout::Transposed: std::swap(s[s.size() - 1], s[s.size() - 2]); return make(s).transpose(-1, -2);
    case Layout::Sliced: s.back() = 2 * shape.back() + 1; return make(s).slice(-1, 1, 2 * shape.back() + 1, 2);
    case Layout::Expanded: s[0] = 1; return make(s).expand(shape);
  }
  return {};
}

std::vector<double> as_double(const std::function<bool(double, double)>& f, const Tensor& a, const Tensor& b) {
  return reference_binary(a, b, [&](double x, double y) { return f(x, y) ? 1.0 : 0.0; });
}

}  // namespace

TEST_CASE("comparisons of same-dtype tensors in every dtype and layout give bool") {
  manual_seed(301);
  const Shape shape{5, 6};
  for (const CompareCase& c : cases()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
      for (Layout la : kLayouts) {
        for (Layout lb : {Layout::Contiguous, Layout::Transposed}) {
          CAPTURE(c.name);
          CAPTURE(dtype_name(dtype));
          CAPTURE(layout_name(la));
          CAPTURE(layout_name(lb));
          const Tensor a = grid(shape, dtype, la), b = grid(shape, dtype, lb);
          const std::vector<double> expected = as_double(c.ref, a, b);
          const Tensor y = c.fn(a, b);
          CHECK(y.dtype() == kBool);
          check_close(y, expected, shape);
          check_close(c.op(a, b), expected, shape, "operator");
        }
      }
    }
  }
}

TEST_CASE("comparisons of bool tensors") {
  const Tensor a = from_vector<bool>({false, false, true, true}, {4});
  const Tensor b = from_vector<bool>({false, true, false, true}, {4});
  for (const CompareCase& c : cases()) {
    CAPTURE(c.name);
    check_close(c.fn(a, b), as_double(c.ref, a, b), {4});
  }
}

TEST_CASE("comparisons promote mixed dtypes and broadcast") {
  manual_seed(302);
  struct Pair {
    DType a, b;
    Shape sa, sb, out;
  };
  const std::vector<Pair> pairs = {
      {kInt32, kFloat16, {3, 1}, {1, 4}, {3, 4}},   {kInt64, kFloat32, {4}, {2, 3, 4}, {2, 3, 4}},
      {kFloat16, kBFloat16, {2, 5}, {5}, {2, 5}},   {kBool, kInt64, {6}, {6}, {6}},
      {kFloat64, kFloat32, {}, {7}, {7}},           {kInt32, kInt64, {2, 1, 3}, {4, 1}, {2, 4, 3}},
      {kFloat32, kFloat16, {0, 3}, {3}, {0, 3}},
  };
  for (const CompareCase& c : cases()) {
    for (const Pair& p : pairs) {
      CAPTURE(c.name);
      CAPTURE(dtype_name(p.a));
      CAPTURE(dtype_name(p.b));
      // Integer tensors hold integers, float ones multiples of 0.5: the promoted comparison is
      // exact, so float64 comparisons of the values are the reference.
      const Tensor a = grid(p.sa, p.a), b = grid(p.sb, p.b);
      const Tensor y = c.fn(a, b);
      CHECK(y.dtype() == kBool);
      check_close(y, as_double(c.ref, a, b), p.out);
    }
  }
  // int 2 against float 2.5: compared in float, not truncated to int.
  const Tensor i = from_vector<int64_t>({2, 3}, {2});
  CHECK((i < 2.5).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK((i == 2.0).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(lt(i, from_vector<float>({2.5f, 2.5f}, {2})).to_vector<bool>() == std::vector<bool>{true, false});
}

TEST_CASE("comparisons with a number on every dtype") {
  manual_seed(303);
  for (const CompareCase& c : cases()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
      for (double number : {0.5, -1.0, 2.0}) {
        CAPTURE(c.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(number);
        const Tensor a = grid({4, 5}, dtype, Layout::Sliced);
        const std::vector<double> expected = reference_unary(a, [&](double x) { return c.ref(x, number) ? 1.0 : 0.0; });
        check_close(c.fn_s(a, number), expected, {4, 5});
        check_close(c.op_s(a, number), expected, {4, 5}, "operator");
      }
      // An integer number too.
      const Tensor a = grid({4, 5}, dtype);
      check_close(c.fn_s(a, 1), reference_unary(a, [&](double x) { return c.ref(x, 1) ? 1.0 : 0.0; }), {4, 5}, "int");
    }
  }
}

TEST_CASE("a number is compared in the tensor's dtype (PyTorch's promotion)") {
  // 0.1 rounds to the same float16 as the tensor's element, so they compare equal in
  // float16, as torch.tensor([0.1], dtype=torch.half) == 0.1 does.
  const Tensor h = full({1}, 0.1, kFloat16);
  CHECK(h.item<double>() != 0.1);  // the stored value is not 0.1 itself
  CHECK(eq(h, 0.1).item<bool>());
  CHECK_FALSE(ne(h, 0.1).item<bool>());
  CHECK(eq(h, full({}, 0.1, kFloat64)).item<bool>());  // a 0-dim float64 tensor ranks below
  CHECK_FALSE(eq(h, full({1}, 0.1, kFloat64)).item<bool>());  // a dimensioned one does not
}

TEST_CASE("NaN compares false except under ne; infinities compare as numbers") {
  const Tensor a = from_vector<double>({kNaN, 1.0, kNaN, kInf, -kInf, kInf}, {6});
  const Tensor b = from_vector<double>({kNaN, kNaN, 1.0, kInf, kInf, 1e308}, {6});
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = a.to(dtype), y = b.to(dtype);
    CHECK(eq(x, y).to_vector<bool>() == std::vector<bool>{false, false, false, true, false, dtype != kFloat64 ? true : false});
    CHECK(ne(x, y).to_vector<bool>() == std::vector<bool>{true, true, true, false, true, dtype != kFloat64 ? false : true});
    CHECK(lt(x, y).to_vector<bool>() == std::vector<bool>{false, false, false, false, true, false});
    CHECK(le(x, y).to_vector<bool>() == std::vector<bool>{false, false, false, true, true, dtype != kFloat64});
    CHECK(gt(x, y).to_vector<bool>() == std::vector<bool>{false, false, false, false, false, dtype == kFloat64});
    CHECK(ge(x, y).to_vector<bool>() == std::vector<bool>{false, false, false, true, false, true});
    for (const CompareCase& c : cases()) {
      CAPTURE(c.name);
      const std::vector<bool> with_nan = c.fn_s(x, kNaN).to_vector<bool>();
      CHECK(with_nan == std::vector<bool>(6, std::string(c.name) == "ne"));
    }
  }
}

TEST_CASE("comparison errors") {
  CHECK_THROWS_WITH_AS(eq(random({2, 3}), random({3, 2})), doctest::Contains("eq: shapes [2, 3] and [3, 2]"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(random({4}) < random({5}), doctest::Contains("lt:"), kiln::Error);
  CHECK_THROWS_WITH_AS(ge(Tensor(), 1), doctest::Contains("ge: argument 'self'"), kiln::Error);
  CHECK_THROWS_WITH_AS(ne(random({2}), Tensor()), doctest::Contains("ne: argument 'other'"), kiln::Error);
}

TEST_CASE("where selects with broadcasting of all three operands") {
  manual_seed(304);
  struct Shapes {
    Shape cond, a, b, out;
  };
  const std::vector<Shapes> patterns = {
      {{3, 4}, {3, 4}, {3, 4}, {3, 4}}, {{3, 1}, {1, 4}, {}, {3, 4}},  {{4}, {2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{}, {5}, {5}, {5}},              {{2, 1}, {}, {}, {2, 1}},      {{0, 3}, {3}, {1}, {0, 3}},
  };
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool}) {
    for (const Shapes& p : patterns) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(shape_str(p.cond));
      CAPTURE(shape_str(p.a));
      CAPTURE(shape_str(p.b));
      const Tensor cond = random(p.cond, kBool), a = random(p.a, dtype, -5, 5), b = random(p.b, dtype, -5, 5);
      const Tensor y = where(cond, a, b);
      CHECK(y.dtype() == dtype);
      REQUIRE(y.sizes() == p.out);
      const std::vector<double> vc = values(cond), va = values(a), vb = values(b);
      std::vector<double> expected(static_cast<size_t>(shape_numel(p.out)));
      for (int64_t i = 0; i < shape_numel(p.out); ++i) {
        const auto idx = unravel(i, p.out);
        expected[i] = vc[broadcast_source(idx, p.cond)] != 0 ? va[broadcast_source(idx, p.a)]
                                                              : vb[broadcast_source(idx, p.b)];
      }
      check_close(y, expected, p.out, tolerance(kFloat64));  // a selection is exact
    }
  }
}

TEST_CASE("where on every layout, with NaN passing through the chosen branch") {
  manual_seed(305);
  for (Layout lc : kLayouts) {
    for (Layout la : kLayouts) {
      CAPTURE(layout_name(lc));
      CAPTURE(layout_name(la));
      const Tensor cond = random_with_layout({4, 6}, lc, kBool);
      const Tensor a = random_with_layout({4, 6}, la, kFloat32);
      const Tensor b = random_with_layout({4, 6}, Layout::Transposed, kFloat32);
      const std::vector<double> vc = values(cond), va = values(a), vb = values(b);
      std::vector<double> expected(vc.size());
      for (size_t i = 0; i < vc.size(); ++i) expected[i] = vc[i] != 0 ? va[i] : vb[i];
      check_close(where(cond, a, b), expected, {4, 6}, tolerance(kFloat64));
    }
  }
  const Tensor cond = from_vector<bool>({true, false, true}, {3});
  const Tensor a = from_vector<double>({kNaN, kNaN, kInf}, {3}), b = from_vector<double>({1, 2, 3}, {3});
  check_close(where(cond, a, b), {kNaN, 2, kInf}, {3});
}

TEST_CASE("where promotes its branches like a binary op") {
  manual_seed(306);
  const Tensor cond = from_vector<bool>({true, false, true}, {3});
  const Tensor i32 = from_vector<int32_t>({1, 2, 3}, {3});
  const Tensor f16 = from_vector<float>({0.5f, -1.5f, 2.25f}, {3}).to(kFloat16);
  Tensor y = where(cond, i32, f16);
  CHECK(y.dtype() == kFloat16);
  check_close(y, {1, -1.5, 3}, {3});
  y = where(cond, from_vector<int64_t>({4, 5, 6}, {3}), full({}, 0.25, kFloat32));
  CHECK(y.dtype() == kFloat32);
  check_close(y, {4, 0.25, 6}, {3});
  // A 0-dim float64 branch does not widen a dimensioned float32 one.
  y = where(cond, from_vector<float>({1.f, 2.f, 3.f}, {3}), full({}, 0.1, kFloat64));
  CHECK(y.dtype() == kFloat32);
  check_close(y, {1, 0.1, 3}, {3});
  CHECK(where(cond, random({3}, kBool), random({3}, kInt32)).dtype() == kInt32);
  CHECK(where(cond, random({3}, kBFloat16), random({3}, kFloat16)).dtype() == kFloat32);
  CHECK(where(cond, random({3}, kInt32), random({3}, kInt64)).dtype() == kInt64);
}

TEST_CASE("where with number branches") {
  const Tensor cond = from_vector<bool>({true, false, false, true}, {2, 2});
  Tensor y = where(cond, 1, 0);
  CHECK(y.dtype() == kInt64);
  CHECK(y.sizes() == Shape{2, 2});
  CHECK(y.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 1});
  y = where(cond, 1.5, -2);
  CHECK(y.dtype() == kFloat32);
  check_close(y, {1.5, -2, -2, 1.5}, {2, 2});
  y = where(cond, true, false);
  CHECK(y.dtype() == kBool);
  CHECK(y.to_vector<bool>() == std::vector<bool>{true, false, false, true});
  y = where(full({}, false, kBool), 7, 8);
  CHECK(y.dim() == 0);
  CHECK(y.item<int64_t>() == 8);
}

TEST_CASE("where errors") {
  const Tensor x = random({3});
  CHECK_THROWS_WITH_AS(where(random({3}, kFloat32), x, x), doctest::Contains("where: expected condition to be a bool"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(where(random({3}, kInt64), x, x), doctest::Contains("where:"), kiln::Error);
  CHECK_THROWS_WITH_AS(where(random({3}, kInt32), 1, 2), doctest::Contains("where:"), kiln::Error);
  CHECK_THROWS_WITH_AS(where(random({3}, kBool), x, random({4})), doctest::Contains("where: shapes"), kiln::Error);
  CHECK_THROWS_WITH_AS(where(random({2, 1}, kBool), random({4}), random({3, 1})), doctest::Contains("where:"),
                       kiln::Error);
  CHECK_THROWS_WITH_AS(where(Tensor(), x, x), doctest::Contains("where: argument 'condition'"), kiln::Error);
  CHECK_THROWS_WITH_AS(where(random({3}, kBool), Tensor(), x), doctest::Contains("where:"), kiln::Error);
  CHECK_THROWS_WITH_AS(where(Tensor(), 1, 2), doctest::Contains("where:"), kiln::Error);
}

TEST_CASE("equal compares shape and values across layouts") {
  manual_seed(307);
  const Tensor a = random({3, 4});
  CHECK(equal(a, a.clone()));
  CHECK(equal(a, a.t().contiguous().t()));  // same values, transposed memory
  Tensor b = a.clone();
  b.select(0, 2).select(0, 3).fill_(b.select(0, 2).select(0, 3).item<double>() + 1);
  CHECK_FALSE(equal(a, b));
  CHECK_FALSE(equal(a, a.reshape({4, 3})));  // same data, other shape
  CHECK_FALSE(equal(a, a.reshape({12})));
  CHECK_FALSE(equal(a, a.select(0, 0)));  // broadcastable is not enough
  CHECK(equal(zeros({0, 2}), zeros({0, 2})));
  CHECK_FALSE(equal(zeros({0, 2}), zeros({2, 0})));
  CHECK(equal(full({}, 3.0), full({}, 3.0)));
  // NaN is not equal to itself.
  const Tensor n = from_vector<double>({1, kNaN}, {2});
  CHECK_FALSE(equal(n, n));
  CHECK(equal(from_vector<double>({kInf, -kInf}, {2}), from_vector<double>({kInf, -kInf}, {2})));
  // Kiln documents that dtypes may differ: values are compared as numbers.
  CHECK(equal(from_vector<int64_t>({1, 2}, {2}), from_vector<float>({1.f, 2.f}, {2})));
  CHECK_FALSE(equal(from_vector<int64_t>({1, 2}, {2}), from_vector<float>({1.f, 2.5f}, {2})));
  CHECK_THROWS_WITH_AS(equal(Tensor(), a), doctest::Contains("equal: argument 'self'"), kiln::Error);
  CHECK_THROWS_WITH_AS(equal(a, Tensor()), doctest::Contains("equal:"), kiln::Error);
}

TEST_CASE("allclose: |a - b| <= atol + rtol * |b|") {
  const auto one = [](double v) { return full({1}, v, kFloat64); };
  // Tolerance atol + rtol * |b| = 0.5 + 1e-3 * 100 = 0.6.
  CHECK(allclose(one(100.5), one(100), 1e-3, 0.5));
  CHECK(allclose(one(99.45), one(100), 1e-3, 0.5));
  CHECK_FALSE(allclose(one(100.7), one(100), 1e-3, 0.5));
  CHECK_FALSE(allclose(one(99.3), one(100), 1e-3, 0.5));
  // rtol scales with |b| only: the check is not symmetric.
  CHECK(allclose(one(1), one(2), 0.5, 0));
  CHECK_FALSE(allclose(one(2), one(1), 0.5, 0));
  CHECK(allclose(one(-1), one(-2), 0.5, 0));
  // atol alone near zero.
  CHECK(allclose(one(1e-9), one(0), 0, 1e-8));
  CHECK_FALSE(allclose(one(1e-7), one(0), 0, 1e-8));
  // Defaults rtol = 1e-5, atol = 1e-8.
  CHECK(allclose(one(1 + 5e-6), one(1)));
  CHECK_FALSE(allclose(one(1 + 5e-5), one(1)));
  CHECK(allclose(one(5e-9), one(0)));
  CHECK_FALSE(allclose(one(5e-8), one(0)));
  // Zero tolerances demand exact equality.
  CHECK(allclose(one(0.25), one(0.25), 0, 0));
  CHECK_FALSE(allclose(one(0.25), one(std::nextafter(0.25, 1.0)), 0, 0));
  // One element out of tolerance is enough.
  const Tensor a = from_vector<double>({1, 2, 3, 4}, {4});
  CHECK(allclose(a, a + 1e-6, 1e-5, 0));
  CHECK_FALSE(allclose(a, from_vector<double>({1, 2, 3.1, 4}, {4})));
}

TEST_CASE("allclose with NaN, infinities, broadcasting and layouts") {
  manual_seed(308);
  const Tensor n = from_vector<double>({1, kNaN}, {2});
  CHECK_FALSE(allclose(n, n));
  CHECK(allclose(n, n, 1e-5, 1e-8, true));
  CHECK_FALSE(allclose(n, from_vector<double>({1, 1}, {2}), 1e-5, 1e-8, true));
  CHECK_FALSE(allclose(from_vector<double>({1, 1}, {2}), n, 1e-5, 1e-8, true));
  const auto v = [](std::vector<double> x) { return from_vector<double>(x, {static_cast<int64_t>(x.size())}); };
  CHECK(allclose(v({kInf, -kInf}), v({kInf, -kInf})));
  CHECK_FALSE(allclose(v({kInf}), v({-kInf})));
  CHECK_FALSE(allclose(v({kInf}), v({1e308}), 1, 1e308));
  CHECK_FALSE(allclose(v({1e308}), v({kInf}), 1, 1e308));
  // Broadcasting: [3, 4] against [4].
  const Tensor row = random({4}, kFloat64);
  const Tensor rows = row.unsqueeze(0).expand({3, 4}).contiguous();
  CHECK(allclose(rows, row));
  CHECK(allclose(row, rows));
  Tensor off = rows.clone();
  off.select(0, 1).select(0, 2).fill_(off.select(0, 1).select(0, 2).item<double>() + 1e-3);
  CHECK_FALSE(allclose(off, row));
  // Any layout of the same values; mixed dtypes compare values.
  for (Layout layout : kLayouts) {
    CAPTURE(layout_name(layout));
    const Tensor x = random_with_layout({3, 5}, layout, kFloat32);
    CHECK(allclose(x, x.contiguous()));
    CHECK(allclose(x, x.to(kFloat64)));
    CHECK_FALSE(allclose(x, x.contiguous() + 1e-3));
  }
  CHECK(allclose(zeros({0}), zeros({0})));
  CHECK_THROWS_WITH_AS(allclose(random({3}), random({4})), doctest::Contains("allclose: shapes"), kiln::Error);
  CHECK_THROWS_WITH_AS(allclose(row, row, -1e-5), doctest::Contains("allclose: rtol"), kiln::Error);
  CHECK_THROWS_WITH_AS(allclose(row, row, 1e-5, -1), doctest::Contains("allclose:"), kiln::Error);
  CHECK_THROWS_WITH_AS(allclose(Tensor(), row), doctest::Contains("allclose: argument 'self'"), kiln::Error);
}
