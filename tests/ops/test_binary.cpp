// Arithmetic ops (add/sub with alpha, mul, true div, pow, the operators) against float64
// references computed from the already-rounded inputs: every float dtype, layout and
// broadcasting pattern, number operands on either side, integer exactness and the error paths.
#include <cmath>
#include <functional>
#include <limits>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  double a_lo, a_hi, b_lo, b_hi;  // input domains suited to the op
};

const std::vector<BinaryCase>& tensor_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, std::plus<double>(), -2, 2, -2, 2},
      {"add alpha 2.5", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); },
       [](double a, double b) { return a + 2.5 * b; }, -2, 2, -2, 2},
      {"add alpha -3", [](const Tensor& a, const Tensor& b) { return add(a, b, -3); },
       [](double a, double b) { return a - 3 * b; }, -2, 2, -2, 2},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, std::minus<double>(), -2, 2, -2, 2},
      {"sub alpha 0.5", [](const Tensor& a, const Tensor& b) { return sub(a, b, 0.5); },
       [](double a, double b) { return a - 0.5 * b; }, -2, 2, -2, 2},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, std::multiplies<double>(), -2, 2, -2, 2},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, std::divides<double>(), -2, 2, 0.5, 3},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 0.25, 3, -2, 2},
      {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; }, std::plus<double>(), -2, 2, -2, 2},
      {"operator-", [](const Tensor& a, const Tensor& b) { return a - b; }, std::minus<double>(), -2, 2, -2, 2},
      {"operator*", [](const Tensor& a, const Tensor& b) { return a * b; }, std::multiplies<double>(), -2, 2, -2, 2},
      {"operator/", [](const Tensor& a, const Tensor& b) { return a / b; }, std::divides<double>(), -2, 2, -3, -0.5},
  };
  return cases;
}

// A tensor op with a number on one side, and its reference on the tensor's values.
struct NumberCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

const std::vector<NumberCase>& number_cases() {
  static const std::vector<NumberCase> cases = {
      {"add(x, 1.25)", [](const Tensor& x) { return add(x, 1.25); }, [](double v) { return v + 1.25; }, -2, 2},
      {"add(x, 1.25, 2)", [](const Tensor& x) { return add(x, 1.25, 2); }, [](double v) { return v + 2.5; }, -2, 2},
      {"sub(x, 0.75, 3)", [](const Tensor& x) { return sub(x, 0.75, 3); }, [](double v) { return v - 2.25; }, -2, 2},
      {"mul(x, -3)", [](const Tensor& x) { return mul(x, -3); }, [](double v) { return -3 * v; }, -2, 2},
      {"mul(x, 0.3)", [](const Tensor& x) { return mul(x, 0.3); }, [](double v) { return 0.3 * v; }, -2, 2},
      {"div(x, 4)", [](const Tensor& x) { return div(x, 4); }, [](double v) { return v / 4; }, -2, 2},
      {"div(x, -0.3)", [](const Tensor& x) { return div(x, -0.3); }, [](double v) { return v / -0.3; }, -2, 2},
      {"pow(x, 2)", [](const Tensor& x) { return pow(x, 2); }, [](double v) { return v * v; }, -2, 2},
      {"pow(x, 3)", [](const Tensor& x) { return pow(x, 3); }, [](double v) { return v * v * v; }, -2, 2},
      {"pow(x, 0.5)", [](const Tensor& x) { return pow(x, 0.5); }, [](double v) { return std::sqrt(v); }, 0, 3},
      {"pow(x, -1.5)", [](const Tensor& x) { return pow(x, -1.5); },
       [](double v) { return 1.0 / (v * std::sqrt(v)); }, 0.25, 3},
      {"pow(2.5, x)", [](const Tensor& x) { return pow(2.5, x); }, [](double v) { return std::pow(2.5, v); }, -2, 2},
      {"pow(2, x)", [](const Tensor& x) { return pow(2, x); }, [](double v) { return std::exp2(v); }, -2, 2},
      {"x + 1.5", [](const Tensor& x) { return x + 1.5; }, [](double v) { return v + 1.5; }, -2, 2},
      {"1.5 + x", [](const Tensor& x) { return 1.5 + x; }, [](double v) { return 1.5 + v; }, -2, 2},
      {"x - 1.5", [](const Tensor& x) { return x - 1.5; }, [](double v) { return v - 1.5; }, -2, 2},
      {"1.5 - x", [](const Tensor& x) { return 1.5 - x; }, [](double v) { return 1.5 - v; }, -2, 2},
      {"x * 2", [](const Tensor& x) { return x * 2; }, [](double v) { return v * 2; }, -2, 2},
      {"2 * x", [](const Tensor& x) { return 2 * x; }, [](double v) { return 2 * v; }, -2, 2},
      {"x / 4", [](const Tensor& x) { return x / 4; }, [](double v) { return v / 4; }, -2, 2},
      {"4 / x", [](const Tensor& x) { return 4 / x; }, [](double v) { return 4 / v; }, 0.5, 3},
      {"-4.5 / x", [](const Tensor& x) { return -4.5 / x; }, [](double v) { return -4.5 / v; }, 0.5, 3},
  };
  return cases;
}

// Checks that `f` throws a kiln::Error whose message contains every piece.
void check_error_mentions(const std::function<void()>& f, std::initializer_list<std::string> pieces) {
  try {
    f();
    FAIL_CHECK("expected a kiln::Error");
  } catch (const kiln::Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : pieces) CHECK_MESSAGE(msg.find(p) != std::string::npos, msg << " lacks " << p);
  }
}

int64_t int_pow_ref(int64_t base, int64_t exp) {
  int64_t r = 1;
  for (int64_t i = 0; i < exp; ++i) r *= base;
  return r;
}

}  // namespace

TEST_CASE("arithmetic matches float64 references in every float dtype and pair of layouts") {
  manual_seed(201);
  const Shape shape{4, 6};
  for (const BinaryCase& c : tensor_cases()) {
    for (DType dtype : kFloatTypes) {
      for (Layout la : kLayouts) {
        for (Layout lb : kLayouts) {
          CAPTURE(c.name);
          CAPTURE(dtype_name(dtype));
          CAPTURE(layout_name(la));
          CAPTURE(layout_name(lb));
          const Tensor a = random_with_layout(shape, la, dtype, c.a_lo, c.a_hi);
          const Tensor b = random_with_layout(shape, lb, dtype, c.b_lo, c.b_hi);
          const Tensor y = c.op(a, b);
          CHECK(y.dtype() == dtype);
          check_close(y, reference_binary(a, b, c.ref), shape);
        }
      }
    }
  }
}

TEST_CASE("arithmetic broadcasts like PyTorch") {
  manual_seed(202);
  struct Pattern {
    Shape a, b, out;
  };
  const std::vector<Pattern> patterns = {
      {{3, 1}, {1, 4}, {3, 4}}, {{4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}}, {{}, {5}, {5}},
      {{5}, {}, {5}},           {{2, 1, 4}, {3, 1}, {2, 3, 4}}, {{1}, {3, 2}, {3, 2}}, {{}, {}, {}},
      {{0, 3}, {3}, {0, 3}},    {{1, 0}, {4, 1}, {4, 0}},
  };
  for (const BinaryCase& c : tensor_cases()) {
    for (DType dtype : kFloatTypes) {
      for (const Pattern& p : patterns) {
        CAPTURE(c.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(shape_str(p.a));
        CAPTURE(shape_str(p.b));
        const Tensor a = random(p.a, dtype, c.a_lo, c.a_hi);
        const Tensor b = random(p.b, dtype, c.b_lo, c.b_hi);
        check_close(c.op(a, b), reference_binary(a, b, c.ref), p.out);
      }
      // Both operands expanded views (stride-0 dims) of different source shapes.
      const Tensor a = random({3, 1}, dtype, c.a_lo, c.a_hi).expand({3, 4});
      const Tensor b = random({1, 4}, dtype, c.b_lo, c.b_hi).expand({3, 4});
      check_close(c.op(a, b), reference_binary(a, b, c.ref), {3, 4}, std::string(c.name) + " expanded");
    }
  }
}

TEST_CASE("arithmetic with a number on either side keeps the float dtype") {
  manual_seed(203);
  for (const NumberCase& c : number_cases()) {
    for (DType dtype : kFloatTypes) {
      for (Layout layout : kLayouts) {
        CAPTURE(c.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(layout_name(layout));
        const Tensor x = random_with_layout({5, 3}, layout, dtype, c.lo, c.hi);
        const Tensor y = c.op(x);
        CHECK(y.dtype() == dtype);
        check_close(y, reference_unary(x, c.ref), {5, 3});
      }
    }
  }
}

TEST_CASE("integer add, sub and mul are exact and keep the dtype") {
  manual_seed(204);
  for (DType dtype : {kInt64, kInt32}) {
    for (Layout layout : kLayouts) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(layout_name(layout));
      const Tensor a = random_with_layout({4, 5}, layout, dtype, -1000, 1000);
      const Tensor b = random({5}, dtype, -1000, 1000);
      const auto check = [&](const Tensor& y, const std::function<double(double, double)>& f, const char* what) {
        CHECK(y.dtype() == dtype);
        check_close(y, reference_binary(a, b, f), {4, 5}, what);
      };
      check(add(a, b), std::plus<double>(), "add");
      check(add(a, b, 3), [](double x, double y) { return x + 3 * y; }, "add alpha 3");
      check(sub(a, b, -2), [](double x, double y) { return x + 2 * y; }, "sub alpha -2");
      check(a - b, std::minus<double>(), "operator-");
      check(a * b, std::multiplies<double>(), "operator*");
      check(add(a, 7), [](double x, double) { return x + 7; }, "add number");
      check(7 - a, [](double x, double) { return 7 - x; }, "number - tensor");
      check(a * -3, [](double x, double) { return -3 * x; }, "mul number");
    }
  }
  // int64 arithmetic beyond 2^53 stays exact (no detour through double).
  const int64_t big = (int64_t{1} << 62) + 1;
  CHECK(add(from_vector<int64_t>({big}, {1}), 2).item<int64_t>() == big + 2);
  CHECK(mul(from_vector<int64_t>({(int64_t{1} << 31) + 1}, {1}), (int64_t{1} << 31) - 1).item<int64_t>() ==
        (int64_t{1} << 62) - 1);
}

TEST_CASE("div is true division: integer operands give float32") {
  manual_seed(205);
  for (DType da : {kInt64, kInt32, kBool}) {
    for (DType db : {kInt64, kInt32}) {
      CAPTURE(dtype_name(da));
      CAPTURE(dtype_name(db));
      const Tensor a = random({3, 4}, da, -20, 20);
      const Tensor b = random({4}, db, 1, 9);
      const Tensor y = div(a, b);
      CHECK(y.dtype() == kFloat32);
      check_close(y, reference_binary(a, b, std::divides<double>()), {3, 4});
      CHECK(equal(a / b, y));
    }
  }
  const Tensor a = from_vector<int64_t>({7, -7, 0, 3}, {4});
  check_close(div(a, 2), {3.5, -3.5, 0, 1.5}, {4}, "int / number");
  CHECK(div(a, 2).dtype() == kFloat32);
  check_close(10 / a, {10.0 / 7, -10.0 / 7, kInf, 10.0 / 3}, {4}, "number / int");
  CHECK((10 / a).dtype() == kFloat32);
  // Division by integer zero follows IEEE once converted: inf, -inf and NaN.
  check_close(div(a, zeros({4}, kInt32)), {kInf, -kInf, kNaN, kInf}, {4}, "int / 0");
  const Tensor t = from_vector<bool>({true, false}, {2});
  check_close(div(t, t), {1, kNaN}, {2}, "bool / bool");
  CHECK(div(t, t).dtype() == kFloat32);
}

TEST_CASE("integer pow is exact, with PyTorch's rules for negative exponents") {
  manual_seed(206);
  for (DType dtype : {kInt64, kInt32}) {
    CAPTURE(dtype_name(dtype));
    const Tensor base = random_with_layout({6, 5}, Layout::Transposed, dtype, -5, 6);
    const Tensor exp = random({6, 5}, dtype, 0, 7);
    const Tensor y = pow(base, exp);
    CHECK(y.dtype() == dtype);
    check_close(y, reference_binary(base, exp, [](double b, double e) {
                  return static_cast<double>(int_pow_ref(static_cast<int64_t>(b), static_cast<int64_t>(e)));
                }),
                {6, 5});
    // Negative exponents in a tensor: 1 stays 1, -1 alternates sign, everything else
    // (0 included) truncates to 0.
    const Tensor nb = from_vector<int64_t>({1, 1, -1, -1, 0, 2, -2, 3, 5}, {9}).to(dtype);
    const Tensor ne = from_vector<int64_t>({-1, -4, -1, -2, -1, -1, -3, -2, 0}, {9}).to(dtype);
    CHECK(pow(nb, ne).to_vector<int64_t>() == std::vector<int64_t>{1, 1, -1, 1, 0, 0, 0, 0, 1});
    // Number exponents and bases.
    const Tensor x = from_vector<int64_t>({-3, -1, 0, 2, 5}, {5}).to(dtype);
    CHECK(pow(x, 2).dtype() == dtype);
    CHECK(pow(x, 3).to_vector<int64_t>() == std::vector<int64_t>{-27, -1, 0, 8, 125});
    CHECK(pow(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 1, 1});
    CHECK_THROWS_WITH_AS(pow(x, -1), doctest::Contains("pow: integers to negative integer powers"), kiln::Error);
    CHECK_THROWS_WITH_AS(pow(x, -2), doctest::Contains("pow:"), kiln::Error);
    const Tensor e = from_vector<int64_t>({0, 1, 2, 5, 10}, {5}).to(dtype);
    CHECK(pow(3, e).dtype() == dtype);
    CHECK(pow(3, e).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 9, 243, 59049});
    // A floating number on either side gives float32.
    CHECK(pow(x, 0.5).dtype() == kFloat32);
    check_close(pow(x, 0.5), {kNaN, kNaN, 0, std::sqrt(2.0), std::sqrt(5.0)}, {5}, "int ** 0.5");
    check_close(pow(x, -1.0), {-1.0 / 3, -1, kInf, 0.5, 0.2}, {5}, "int ** -1.0");
    CHECK(pow(1.5, e).dtype() == kFloat32);
    check_close(pow(1.5, e), {1, 1.5, 2.25, std::pow(1.5, 5), std::pow(1.5, 10)}, {5}, "1.5 ** int");
  }
  // int64 powers beyond 2^53 stay exact.
  CHECK(pow(from_vector<int64_t>({3}, {1}), 39).item<int64_t>() == int_pow_ref(3, 39));
  const Tensor t = from_vector<bool>({true, false}, {2});
  CHECK_THROWS_WITH_AS(pow(t, t), doctest::Contains("pow:"), kiln::Error);
}

TEST_CASE("pow of floats with negative bases and integral exponents") {
  manual_seed(207);
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor base = random({4, 4}, dtype, -3, -0.25);
    const Tensor exp = random({4, 4}, kInt64, -3, 4).to(dtype);
    check_close(pow(base, exp), reference_binary(base, exp, [](double b, double e) { return std::pow(b, e); }),
                {4, 4});
    // A fractional power of a negative base is NaN.
    CHECK(std::isnan(pow(base, 0.5).to_vector<double>()[0]));
  }
}

TEST_CASE("the result dtype of tensor-tensor arithmetic follows torch.result_type") {
  manual_seed(208);
  const std::vector<DType> all = {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
  using D = DType;
  // expected[i][j]: torch.result_type of a [3] tensor of all[i] with one of all[j].
  const D B = D::Bool, I = D::Int32, L = D::Int64, H = D::Float16, BF = D::BFloat16, F = D::Float32,
          F64 = D::Float64;
  const D expected[7][7] = {
      /* bool     */ {B, I, L, H, BF, F, F64},
      /* int32    */ {I, I, L, H, BF, F, F64},
      /* int64    */ {L, L, L, H, BF, F, F64},
      /* float16  */ {H, H, H, H, F, F, F64},
      /* bfloat16 */ {BF, BF, BF, F, BF, F, F64},
      /* float32  */ {F, F, F, F, F, F, F64},
      /* float64  */ {F64, F64, F64, F64, F64, F64, F64},
  };
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = 0; j < all.size(); ++j) {
      CAPTURE(dtype_name(all[i]));
      CAPTURE(dtype_name(all[j]));
      const Tensor a = random({3}, all[i], -3, 3), b = random({3}, all[j], -3, 3);
      const Tensor y = add(a, b);
      CHECK(y.dtype() == expected[i][j]);
      CHECK(mul(a, b).dtype() == expected[i][j]);
      if (expected[i][j] == kBool) {  // bool + bool is logical or
        check_close(y, reference_binary(a, b, [](double x, double z) { return (x != 0 || z != 0) ? 1.0 : 0.0; }),
                    {3});
      } else {
        check_close(y, reference_binary(a, b, std::plus<double>()), {3});
      }
      const D div_expected = is_floating(expected[i][j]) ? expected[i][j] : kFloat32;
      CHECK(div(a, b).dtype() == div_expected);
    }
  }
}

TEST_CASE("tensor-number and 0-dim promotion follows PyTorch") {
  manual_seed(209);
  const auto t = [](DType d) { return random({3}, d, 0, 4); };
  const auto s = [](DType d) { return random({}, d, 1, 4); };
  // Numbers: an int keeps the tensor's dtype, a float gives float32 for integer tensors.
  CHECK(mul(t(kInt64), 2.5).dtype() == kFloat32);
  CHECK(add(t(kFloat16), 2.5).dtype() == kFloat16);
  CHECK(add(t(kBFloat16), 7).dtype() == kBFloat16);
  CHECK(add(t(kInt32), 2).dtype() == kInt32);
  CHECK(add(t(kBool), 1).dtype() == kInt64);
  CHECK(add(t(kBool), 1.5).dtype() == kFloat32);
  CHECK(add(t(kBool), true).dtype() == kBool);
  CHECK(add(t(kInt32), true).dtype() == kInt32);
  CHECK(mul(t(kFloat64), 2.5).dtype() == kFloat64);
  CHECK((2.5 * t(kInt32)).dtype() == kFloat32);
  CHECK((2 - t(kInt32)).dtype() == kInt32);
  // 0-dim tensors count below dimensioned ones unless they bring a higher category.
  CHECK(add(s(kFloat64), t(kFloat32)).dtype() == kFloat32);
  CHECK(add(t(kFloat32), s(kFloat64)).dtype() == kFloat32);
  CHECK(add(s(kFloat64), t(kInt32)).dtype() == kFloat64);
  CHECK(add(s(kInt64), t(kInt32)).dtype() == kInt32);
  CHECK(add(s(kFloat32), t(kFloat16)).dtype() == kFloat16);
  CHECK(add(s(kFloat16), t(kInt64)).dtype() == kFloat16);
  CHECK(add(s(kInt32), t(kBool)).dtype() == kInt32);
  CHECK(add(t(kInt32), s(kBool)).dtype() == kInt32);
  // Between 0-dim tensors and numbers the same ranking applies.
  CHECK(add(s(kFloat32), s(kFloat64)).dtype() == kFloat64);
  CHECK(add(s(kInt32), 2.5).dtype() == kFloat32);
  CHECK(add(s(kFloat64), 2.5).dtype() == kFloat64);
  CHECK(add(s(kInt32), 2).dtype() == kInt32);
  CHECK(add(s(kBool), 1).dtype() == kInt64);

  // Values follow the promoted dtype.
  const Tensor i = from_vector<int64_t>({1, 2, -3}, {3});
  check_close(i * 2.5, {2.5, 5, -7.5}, {3}, "int64 * 2.5");
  const Tensor z = full({}, 0.1, kFloat64);
  const Tensor f = from_vector<float>({1.f, 2.f, 3.f}, {3});
  check_close(z + f, {1.1, 2.1, 3.1}, {3}, "0-dim float64 + float32");
  const Tensor bools = from_vector<bool>({true, false, true}, {3});
  check_close(bools + 1, {2, 1, 2}, {3}, "bool + 1");
  check_close(add(bools, from_vector<bool>({false, false, true}, {3})), {1, 0, 1}, {3}, "bool + bool");
}

TEST_CASE("alpha must fit the result dtype") {
  manual_seed(210);
  for (DType dtype : {kInt64, kInt32, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = random({3}, dtype, 0, 5), b = random({3}, dtype, 0, 5);
    CHECK_THROWS_WITH_AS(add(a, b, 2.5), doctest::Contains("add: for integral input tensors, argument alpha"),
                         kiln::Error);
    CHECK_THROWS_WITH_AS(add(a, 1, 0.5), doctest::Contains("add:"), kiln::Error);
  }
  const Tensor i = random({3}, kInt64, 0, 5);
  CHECK_THROWS_WITH_AS(sub(i, i, 1.5), doctest::Contains("sub: for integral input tensors"), kiln::Error);
  // A float alpha is fine once a float operand makes the result floating.
  const Tensor f = random({3}, kFloat32);
  check_close(add(i, f, 0.5), reference_binary(i, f, [](double x, double y) { return x + 0.5 * y; }), {3});
  // A bool alpha is only for bool results (PyTorch's alpha_check); an integer alpha with
  // bool tensors is allowed and, bool arithmetic being logical, a + 2 * b is a or b.
  CHECK_THROWS_WITH_AS(add(f, f, true), doctest::Contains("add: boolean alpha"), kiln::Error);
  CHECK_THROWS_WITH_AS(add(i, i, false), doctest::Contains("add: boolean alpha"), kiln::Error);
  const Tensor p = from_vector<bool>({true, false, false}, {3}), q = from_vector<bool>({false, true, false}, {3});
  CHECK(add(p, q, 2).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(add(p, q, 0).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(add(p, q, true).to_vector<bool>() == std::vector<bool>{true, true, false});
}

TEST_CASE("subtraction with bool tensors is an error, as in PyTorch") {
  const Tensor p = from_vector<bool>({true, false}, {2});
  CHECK_THROWS_WITH_AS(sub(p, p), doctest::Contains("sub: subtraction with two bool tensors"), kiln::Error);
  CHECK_THROWS_WITH_AS(p - p, doctest::Contains("sub:"), kiln::Error);
  // One bool operand is enough (PyTorch: "with a bool tensor is not supported").
  const Tensor i = from_vector<int64_t>({3, 4}, {2});
  CHECK_THROWS_WITH_AS(sub(p, i), doctest::Contains("sub: subtraction with a bool tensor"), kiln::Error);
  CHECK_THROWS_WITH_AS(i - p, doctest::Contains("sub:"), kiln::Error);
  CHECK_THROWS_WITH_AS(p - 1, doctest::Contains("sub:"), kiln::Error);
  CHECK_THROWS_WITH_AS(1 - p, doctest::Contains("sub:"), kiln::Error);
  CHECK_THROWS_WITH_AS(i - true, doctest::Contains("sub:"), kiln::Error);
}

TEST_CASE("arithmetic errors: broadcast mismatch and undefined operands") {
  const Tensor a = random({2, 3}), b = random({4});
  CHECK_THROWS_WITH_AS(add(a, b), doctest::Contains("add:"), kiln::Error);
  check_error_mentions([&] { (void)add(a, b); }, {"add:", "[2, 3]", "[4]"});
  check_error_mentions([&] { (void)(a * b); }, {"mul:", "[2, 3]", "[4]"});
  check_error_mentions([&] { (void)div(random({3, 1, 5}), random({4, 6})); }, {"div:", "[3, 1, 5]", "[4, 6]"});
  check_error_mentions([&] { (void)pow(random({0}), random({2})); }, {"pow:", "[0]", "[2]"});
  CHECK_THROWS_WITH_AS(sub(random({5}), random({0})), doctest::Contains("sub:"), kiln::Error);
  CHECK_THROWS_WITH_AS(add(Tensor(), a), doctest::Contains("add: argument 'self'"), kiln::Error);
  CHECK_THROWS_WITH_AS(mul(a, Tensor()), doctest::Contains("mul: argument 'other'"), kiln::Error);
  CHECK_THROWS_WITH_AS(pow(2, Tensor()), doctest::Contains("pow:"), kiln::Error);
}

TEST_CASE("arithmetic on odd lengths and zero-size operands") {
  manual_seed(211);
  for (int64_t n : {1, 7, 127, 1000}) {
    for (DType dtype : kFloatTypes) {
      CAPTURE(n);
      CAPTURE(dtype_name(dtype));
      const Tensor a = random({n}, dtype), b = random_with_layout({n}, Layout::Sliced, dtype, 0.5, 2);
      check_close(add(a, b), reference_binary(a, b, std::plus<double>()), {n}, "add");
      check_close(mul(a, b), reference_binary(a, b, std::multiplies<double>()), {n}, "mul");
      check_close(div(a, b), reference_binary(a, b, std::divides<double>()), {n}, "div");
    }
  }
  for (DType dtype : {kFloat32, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Tensor e = zeros({0, 3}, dtype);
    CHECK(add(e, 1).sizes() == Shape{0, 3});
    CHECK(mul(e, random({3}, dtype)).sizes() == Shape{0, 3});
    CHECK(div(e, 2).sizes() == Shape{0, 3});
    CHECK(div(e, 2).dtype() == kFloat32);
  }
}
