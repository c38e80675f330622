// Unary elementwise ops against float64 references written here with <cmath>: every op in
// every float dtype and layout, PyTorch's dtype rules for integer and bool inputs (neg, abs,
// relu keep the dtype; transcendental ops give float32), edge values, empty and 0-dim inputs.
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string_view>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

double gelu_erf_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct UnaryCase {
  const char* name;  // also the prefix of the op's error messages
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;  // random input domain suited to the op
};

const std::vector<UnaryCase>& float_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double v) { return -v; }, -3, 3},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, 0.05, 5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, 0.0, 5},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1.0 / std::sqrt(v); }, 0.05, 5},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::fabs(v); }, -3, 3},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, -3, 3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, -6, 6},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0.0; }, -3, 3},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_erf_ref, -4, 4},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref, -4, 4},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double v) { return v * sigmoid_ref(v); }, -6, 6},
  };
  return cases;
}

const UnaryCase& find_case(std::string_view name) {
  for (const UnaryCase& c : float_cases())
    if (name == c.name) return c;
  FAIL("no case " << name);
  return float_cases().front();
}

}  // namespace

TEST_CASE("unary ops match float64 references in every float dtype and layout") {
  manual_seed(101);
  const Shape shape{3, 5, 7};
  for (const UnaryCase& c : float_cases()) {
    for (DType dtype : kFloatTypes) {
      for (Layout layout : kLayouts) {
        CAPTURE(c.name);
        CAPTURE(dtype_name(dtype));
        CAPTURE(layout_name(layout));
        const Tensor x = random_with_layout(shape, layout, dtype, c.lo, c.hi);
        const std::vector<double> before = values(x);
        const Tensor y = c.op(x);
        CHECK(y.dtype() == dtype);
        CHECK_FALSE(y.is_alias_of(x));
        check_close(y, reference_unary(x, c.ref), shape);
        CHECK(values(x) == before);  // the input is left untouched
      }
    }
  }
}

TEST_CASE("unary ops cover odd lengths (tails of vectorised loops)") {
  manual_seed(102);
  for (int64_t n : {1, 7, 127, 1000}) {
    for (const UnaryCase& c : float_cases()) {
      for (DType dtype : kFloatTypes) {
        for (Layout layout : {Layout::Contiguous, Layout::Sliced}) {
          CAPTURE(n);
          CAPTURE(c.name);
          CAPTURE(dtype_name(dtype));
          CAPTURE(layout_name(layout));
          const Tensor x = random_with_layout({n}, layout, dtype, c.lo, c.hi);
          check_close(c.op(x), reference_unary(x, c.ref), {n});
        }
      }
    }
  }
}

TEST_CASE("unary operator- is neg") {
  manual_seed(103);
  for (DType dtype : {kFloat32, kFloat16, kInt64, kInt32}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = random({4, 6}, dtype, -20, 20);
    const Tensor y = -x;
    CHECK(y.dtype() == dtype);
    check_close(y, reference_unary(x, [](double v) { return -v; }), {4, 6});
  }
  CHECK_THROWS_WITH_AS(-random({3}, kBool), doctest::Contains("neg:"), kiln::Error);
}

TEST_CASE("unary ops at special values: infinities, zeros, NaN, out-of-domain inputs") {
  const std::vector<double> in = {-kInf, -1.0, -0.0, 0.0, 1.0, kInf, kNaN};
  const Shape shape{static_cast<int64_t>(in.size())};
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = from_vector(in, shape).to(dtype);
    check_close(exp(x), {0, std::exp(-1.0), 1, 1, std::exp(1.0), kInf, kNaN}, shape, "exp");
    check_close(log(x), {kNaN, kNaN, -kInf, -kInf, 0, kInf, kNaN}, shape, "log");
    check_close(sqrt(x), {kNaN, kNaN, 0, 0, 1, kInf, kNaN}, shape, "sqrt");
    check_close(rsqrt(x), {kNaN, kNaN, -kInf, kInf, 1, 0, kNaN}, shape, "rsqrt");
    check_close(tanh(x), {-1, std::tanh(-1.0), 0, 0, std::tanh(1.0), 1, kNaN}, shape, "tanh");
    check_close(sigmoid(x), {0, sigmoid_ref(-1), 0.5, 0.5, sigmoid_ref(1), 1, kNaN}, shape, "sigmoid");
    check_close(abs(x), {kInf, 1, 0, 0, 1, kInf, kNaN}, shape, "abs");
    check_close(neg(x), {kInf, 1, 0, 0, -1, -kInf, kNaN}, shape, "neg");
    // PyTorch's relu is clamp_min(x, 0), which propagates NaN.
    check_close(relu(x), {0, 0, 0, 0, 1, kInf, kNaN}, shape, "relu");
    // gelu and silu at -inf are left out: PyTorch's formulas give -inf * 0 = NaN there, not
    // the limit 0, and neither answer is worth pinning down.
    const Tensor finite = x.slice(0, 1, 7);
    const Shape fs{6};
    check_close(gelu(finite), {gelu_erf_ref(-1), 0, 0, gelu_erf_ref(1), kInf, kNaN}, fs, "gelu");
    check_close(gelu(finite, "tanh"), {gelu_tanh_ref(-1), 0, 0, gelu_tanh_ref(1), kInf, kNaN}, fs, "gelu tanh");
    check_close(silu(finite), {-sigmoid_ref(-1), 0, 0, sigmoid_ref(1), kInf, kNaN}, fs, "silu");
  }
}

TEST_CASE("neg, abs and relu keep integer dtypes and are exact") {
  manual_seed(104);
  for (DType dtype : {kInt64, kInt32}) {
    for (Layout layout : kLayouts) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(layout_name(layout));
      const Tensor x = random_with_layout({6, 9}, layout, dtype, -1000, 1000);
      for (const char* name : {"neg", "abs", "relu"}) {
        CAPTURE(name);
        const UnaryCase& c = find_case(name);
        const Tensor y = c.op(x);
        CHECK(y.dtype() == dtype);
        check_close(y, reference_unary(x, c.ref), {6, 9});
      }
    }
  }
  // Values beyond float32's exact range stay exact in int64.
  const int64_t big = (int64_t{1} << 53) + 1;
  const Tensor x = from_vector<int64_t>({big, -big, 3}, {3});
  CHECK(neg(x).to_vector<int64_t>() == std::vector<int64_t>{-big, big, -3});
  CHECK(abs(x).to_vector<int64_t>() == std::vector<int64_t>{big, big, 3});
  CHECK(relu(x).to_vector<int64_t>() == std::vector<int64_t>{big, 0, 3});
}

TEST_CASE("transcendental ops on int64, int32 and bool inputs compute in float32") {
  manual_seed(105);
  for (const char* name : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid"}) {
    const UnaryCase& c = find_case(name);
    for (DType dtype : {kInt64, kInt32, kBool}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dtype));
      // Integers from [-3, 10): includes 0 (log -> -inf, rsqrt -> inf) and negatives (NaN).
      const Tensor x = random_with_layout({5, 8}, Layout::Transposed, dtype, -3, 10);
      const Tensor y = c.op(x);
      CHECK(y.dtype() == kFloat32);
      check_close(y, reference_unary(x, c.ref), {5, 8});
    }
  }
}

TEST_CASE("gelu and silu reject integer inputs; neg, abs and relu reject bool") {
  for (DType dtype : {kInt64, kInt32, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = random({4}, dtype, -3, 3);
    CHECK_THROWS_WITH_AS(gelu(x), doctest::Contains("gelu:"), kiln::Error);
    CHECK_THROWS_WITH_AS(gelu(x, "tanh"), doctest::Contains("gelu:"), kiln::Error);
    CHECK_THROWS_WITH_AS(silu(x), doctest::Contains("silu:"), kiln::Error);
  }
  const Tensor b = random({4}, kBool);
  CHECK_THROWS_WITH_AS(neg(b), doctest::Contains("neg:"), kiln::Error);
  CHECK_THROWS_WITH_AS(abs(b), doctest::Contains("abs:"), kiln::Error);
  CHECK_THROWS_WITH_AS(relu(b), doctest::Contains("relu:"), kiln::Error);
}

TEST_CASE("gelu rejects an unknown approximation") {
  const Tensor x = random({3});
  CHECK_THROWS_WITH_AS(gelu(x, "erf"), doctest::Contains("gelu: approximate must be"), kiln::Error);
  CHECK_THROWS_WITH_AS(gelu(x, "Tanh"), doctest::Contains("gelu:"), kiln::Error);
  CHECK_THROWS_WITH_AS(gelu(x, ""), doctest::Contains("gelu:"), kiln::Error);
}

TEST_CASE("unary ops reject undefined tensors") {
  for (const UnaryCase& c : float_cases()) {
    CAPTURE(c.name);
    const std::string prefix = std::string(c.name == std::string("gelu_tanh") ? "gelu" : c.name) + ":";
    CHECK_THROWS_WITH_AS(c.op(Tensor()), doctest::Contains(prefix.c_str()), kiln::Error);
  }
}

TEST_CASE("unary ops on zero-size and 0-dim inputs") {
  manual_seed(106);
  for (const UnaryCase& c : float_cases()) {
    for (DType dtype : kFloatTypes) {
      CAPTURE(c.name);
      CAPTURE(dtype_name(dtype));
      for (const Shape& shape : {Shape{0}, Shape{3, 0}, Shape{0, 4, 2}}) {
        const Tensor y = c.op(zeros(shape, dtype));
        CHECK(y.sizes() == shape);
        CHECK(y.dtype() == dtype);
        CHECK(y.numel() == 0);
      }
      const Tensor x = random({}, dtype, c.lo, c.hi);
      const Tensor y = c.op(x);
      CHECK(y.dim() == 0);
      check_close(y, reference_unary(x, c.ref), {});
    }
  }
  // Integer rules hold for empty and 0-dim tensors too.
  CHECK(exp(zeros({0}, kInt64)).dtype() == kFloat32);
  CHECK(neg(zeros({0}, kInt32)).dtype() == kInt32);
  CHECK(sqrt(full({}, 9, kInt64)).item<double>() == 3.0);
  CHECK_THROWS_WITH_AS(gelu(zeros({0}, kInt64)), doctest::Contains("gelu:"), kiln::Error);
}
