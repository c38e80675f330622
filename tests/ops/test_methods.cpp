// The method forms (x.sum(), x.exp(), x.matmul(y), ...) against the free functions they
// forward to: same dtype, shape and values, on data where the op is defined. Also the
// integer-dim overloads (x.sum(1) is sum(x, {1}); x.sum({}) still reduces every dim) and
// the in-place methods' return value.
#include <functional>
#include <string>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct MethodCase {
  std::string name;
  std::function<Tensor(const Tensor& x, const Tensor& y)> method;
  std::function<Tensor(const Tensor& x, const Tensor& y)> free;
};

// Same dtype, shape and every value (NaN where NaN).
void check_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  check_close(got, values(want), want.sizes(), Tolerance{0, 0});
}

}  // namespace

TEST_CASE("every method equals its free function") {
  manual_seed(601);
  // x in (0.1, 2) so log, sqrt and pow are defined; y with matching shape for binary ops.
  const Tensor x = random({3, 4}, kFloat32, 0.1, 2.0);
  const Tensor y = random({3, 4}, kFloat32, 0.1, 2.0);
  using T = const Tensor&;
  const std::vector<MethodCase> cases = {
      {"sum", [](T a, T) { return a.sum(); }, [](T a, T) { return sum(a); }},
      {"sum_dims", [](T a, T) { return a.sum({0, 1}, true); }, [](T a, T) { return sum(a, {0, 1}, true); }},
      {"sum_int", [](T a, T) { return a.sum(1); }, [](T a, T) { return sum(a, {1}); }},
      {"sum_int_keepdim", [](T a, T) { return a.sum(-1, true); }, [](T a, T) { return sum(a, {-1}, true); }},
      {"sum_empty_list", [](T a, T) { return a.sum({}); }, [](T a, T) { return sum(a, {}); }},
      {"sum_one_dim_list", [](T a, T) { return a.sum({1}); }, [](T a, T) { return sum(a, {1}); }},
      {"mean", [](T a, T) { return a.mean(); }, [](T a, T) { return mean(a); }},
      {"mean_dims", [](T a, T) { return a.mean({0}); }, [](T a, T) { return mean(a, {0}); }},
      {"mean_int", [](T a, T) { return a.mean(1, true); }, [](T a, T) { return mean(a, {1}, true); }},
      {"max", [](T a, T) { return a.max(); }, [](T a, T) { return max(a); }},
      {"max_dims", [](T a, T) { return a.max({1}, true); }, [](T a, T) { return max(a, {1}, true); }},
      {"min", [](T a, T) { return a.min(); }, [](T a, T) { return min(a); }},
      {"min_dims", [](T a, T) { return a.min({0}); }, [](T a, T) { return min(a, {0}); }},
      {"amax", [](T a, T) { return a.amax({0, 1}); }, [](T a, T) { return amax(a, {0, 1}); }},
      {"amax_int", [](T a, T) { return a.amax(1); }, [](T a, T) { return amax(a, {1}); }},
      {"amin", [](T a, T) { return a.amin({1}, true); }, [](T a, T) { return amin(a, {1}, true); }},
      {"amin_int", [](T a, T) { return a.amin(0, true); }, [](T a, T) { return amin(a, {0}, true); }},
      {"argmax", [](T a, T) { return a.argmax(); }, [](T a, T) { return argmax(a); }},
      {"argmax_dim", [](T a, T) { return a.argmax(1, true); }, [](T a, T) { return argmax(a, 1, true); }},
      {"argmin", [](T a, T) { return a.argmin(); }, [](T a, T) { return argmin(a); }},
      {"argmin_dim", [](T a, T) { return a.argmin(0); }, [](T a, T) { return argmin(a, 0); }},
      {"exp", [](T a, T) { return a.exp(); }, [](T a, T) { return exp(a); }},
      {"log", [](T a, T) { return a.log(); }, [](T a, T) { return log(a); }},
      {"sqrt", [](T a, T) { return a.sqrt(); }, [](T a, T) { return sqrt(a); }},
      {"rsqrt", [](T a, T) { return a.rsqrt(); }, [](T a, T) { return rsqrt(a); }},
      {"abs", [](T a, T) { return (-a).abs(); }, [](T a, T) { return abs(-a); }},
      {"neg", [](T a, T) { return a.neg(); }, [](T a, T) { return neg(a); }},
      {"tanh", [](T a, T) { return a.tanh(); }, [](T a, T) { return tanh(a); }},
      {"sigmoid", [](T a, T) { return a.sigmoid(); }, [](T a, T) { return sigmoid(a); }},
      {"relu", [](T a, T) { return (a - 1).relu(); }, [](T a, T) { return relu(a - 1); }},
      {"gelu", [](T a, T) { return a.gelu(); }, [](T a, T) { return gelu(a); }},
      {"gelu_tanh", [](T a, T) { return a.gelu("tanh"); }, [](T a, T) { return gelu(a, "tanh"); }},
      {"silu", [](T a, T) { return a.silu(); }, [](T a, T) { return silu(a); }},
      {"pow_tensor", [](T a, T b) { return a.pow(b); }, [](T a, T b) { return pow(a, b); }},
      {"pow_number", [](T a, T) { return a.pow(3); }, [](T a, T) { return pow(a, 3); }},
      {"add", [](T a, T b) { return a.add(b); }, [](T a, T b) { return add(a, b); }},
      {"add_alpha", [](T a, T b) { return a.add(b, 2.5); }, [](T a, T b) { return add(a, b, 2.5); }},
      {"add_number", [](T a, T) { return a.add(2, 3); }, [](T a, T) { return add(a, 2, 3); }},
      {"sub", [](T a, T b) { return a.sub(b); }, [](T a, T b) { return sub(a, b); }},
      {"sub_alpha", [](T a, T b) { return a.sub(b, -1.5); }, [](T a, T b) { return sub(a, b, -1.5); }},
      {"sub_number", [](T a, T) { return a.sub(0.5); }, [](T a, T) { return sub(a, 0.5); }},
      {"mul", [](T a, T b) { return a.mul(b); }, [](T a, T b) { return mul(a, b); }},
      {"mul_number", [](T a, T) { return a.mul(-3); }, [](T a, T) { return mul(a, -3); }},
      {"div", [](T a, T b) { return a.div(b); }, [](T a, T b) { return div(a, b); }},
      {"div_number", [](T a, T) { return a.div(7); }, [](T a, T) { return div(a, 7); }},
      {"matmul", [](T a, T b) { return a.matmul(b.t()); }, [](T a, T b) { return matmul(a, b.t()); }},
      {"mm", [](T a, T b) { return a.t().mm(b); }, [](T a, T b) { return mm(a.t(), b); }},
      {"softmax", [](T a, T) { return a.softmax(1); }, [](T a, T) { return softmax(a, 1); }},
      {"log_softmax", [](T a, T) { return a.log_softmax(0); }, [](T a, T) { return log_softmax(a, 0); }},
      {"clamp", [](T a, T) { return a.clamp(0.5, 1.5); }, [](T a, T) { return clamp(a, 0.5, 1.5); }},
      {"clamp_min", [](T a, T) { return a.clamp_min(1); }, [](T a, T) { return clamp_min(a, 1); }},
      {"clamp_max", [](T a, T) { return a.clamp_max(1); }, [](T a, T) { return clamp_max(a, 1); }},
      {"masked_fill", [](T a, T b) { return a.masked_fill(b > 1, -1); },
       [](T a, T b) { return masked_fill(a, b > 1, -1); }},
      {"index_select", [](T a, T) { return a.index_select(1, tensor({3, 1, 1})); },
       [](T a, T) { return index_select(a, 1, tensor({3, 1, 1})); }},
      {"gather", [](T a, T) { return a.gather(0, tensor({{2, 0, 1, 1}})); },
       [](T a, T) { return gather(a, 0, tensor({{2, 0, 1, 1}})); }},
      {"eq", [](T a, T b) { return a.eq(b); }, [](T a, T b) { return eq(a, b); }},
      {"eq_number", [](T a, T) { return a.eq(1); }, [](T a, T) { return eq(a, 1); }},
      {"ne", [](T a, T b) { return a.ne(b); }, [](T a, T b) { return ne(a, b); }},
      {"ne_number", [](T a, T) { return a.ne(1); }, [](T a, T) { return ne(a, 1); }},
      {"lt", [](T a, T b) { return a.lt(b); }, [](T a, T b) { return lt(a, b); }},
      {"lt_number", [](T a, T) { return a.lt(1); }, [](T a, T) { return lt(a, 1); }},
      {"le", [](T a, T b) { return a.le(b); }, [](T a, T b) { return le(a, b); }},
      {"le_number", [](T a, T) { return a.le(1); }, [](T a, T) { return le(a, 1); }},
      {"gt", [](T a, T b) { return a.gt(b); }, [](T a, T b) { return gt(a, b); }},
      {"gt_number", [](T a, T) { return a.gt(1); }, [](T a, T) { return gt(a, 1); }},
      {"ge", [](T a, T b) { return a.ge(b); }, [](T a, T b) { return ge(a, b); }},
      {"ge_number", [](T a, T) { return a.ge(1); }, [](T a, T) { return ge(a, 1); }},
      {"half", [](T a, T) { return a.half(); }, [](T a, T) { return a.to(kFloat16); }},
      {"bfloat16", [](T a, T) { return a.bfloat16(); }, [](T a, T) { return a.to(kBFloat16); }},
  };
  for (const MethodCase& c : cases) {
    CAPTURE(c.name);
    check_same(c.method(x, y), c.free(x, y));
  }
}

TEST_CASE("integer dims reduce one dim; an empty list reduces them all") {
  const Tensor x = arange(24).view({2, 3, 4}).to(kFloat64);
  CHECK(x.sum(1).sizes() == Shape{2, 4});
  CHECK(x.sum({}).dim() == 0);  // not sum over dim 0
  CHECK(x.sum({}).item<double>() == 276.0);
  CHECK(x.sum({1}).sizes() == Shape{2, 4});
  CHECK(x.mean(2, true).sizes() == Shape{2, 3, 1});
  CHECK(x.amax(0).sizes() == Shape{3, 4});
  CHECK(x.amin(-1, true).sizes() == Shape{2, 3, 1});
  CHECK(x.sum(int32_t{0}).sizes() == Shape{3, 4});
}

TEST_CASE("equal() as a method, and in-place methods return this tensor") {
  const Tensor a = tensor({1.0, 2.0});
  CHECK(a.equal(tensor({1.0, 2.0})));
  CHECK_FALSE(a.equal(tensor({1.0, 3.0})));
  CHECK(a.equal(tensor({1, 2})));  // dtypes may differ, as equal() allows
  Tensor b = a.clone();
  CHECK(&b.clamp_(0, 1.5) == &b);
  CHECK(&b.masked_fill_(tensor({true, false}), 9) == &b);
  CHECK(b.to_vector<float>() == std::vector<float>{9, 1.5f});
}

TEST_CASE("method errors name the op the method forwards to") {
  const Tensor x = ones({2, 3});
  CHECK_THROWS_WITH_AS(x.sum(2), doctest::Contains("sum: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.mm(x), doctest::Contains("mm: shapes [2, 3] and [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(x.gather(0, tensor({{5}})), doctest::Contains("gather: index 5 is out of bounds"), Error);
}
