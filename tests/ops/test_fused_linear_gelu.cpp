// fused_linear_gelu on the CPU: against a float64 reference computed here with plain loops on
// random data (M, N, K in {1, 7, 127} crossed, mid-size shapes, both GELU modes, every
// floating dtype, 3-D, 1-D and strided operands, no bias, zero sizes), against the unfused
// gelu(linear(...)) where NaN and Inf must land in the same places, the pre-activation that
// only autograd makes it write, its record, and every error. Backward: test_fused_linear_gelu_backward.cpp.
#include <array>
#include <cmath>
#include <string>

#include "ops/fused_linear_gelu_reference.h"
#include "ops/op_cost.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// x [M, K] in [-1, 1), w [N, K] and b [N] scaled by 1/sqrt(K) so h = x w^T + b stays O(1),
// where GELU bends (large |h| would test only its linear and zero tails).
struct Operands {
  Tensor x, w, b;
};
Operands operands(int64_t m, int64_t n, int64_t k, DType dtype) {
  const double s = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  return {random({m, k}, dtype, -1.0, 1.0), random({n, k}, dtype, -2.0 * s, 2.0 * s), random({n}, dtype, -0.5, 0.5)};
}

// The fused op against the float64 reference: the relative norm error within the dtype's.
void check_fused(const Tensor& x, const Tensor& w, const Tensor& b, const char* mode, const std::string& what) {
  INFO(what << " dtype " << dtype_name(x.dtype()) << " mode " << std::string(mode) << " x " << shape_str(x.sizes())
            << " w " << shape_str(w.sizes()) << (b.defined() ? " with bias" : " no bias"));
  const Tensor out = fused_linear_gelu(x, w, b, mode);
  Shape shape = x.sizes();
  shape.back() = w.sizes()[0];
  REQUIRE(out.sizes() == shape);
  CHECK(out.dtype() == x.dtype());
  CHECK(out.is_contiguous());
  const FusedReference ref = fused_reference(x, w, b, std::string(mode) == "tanh");
  const double err = relative_norm_error(values(out), ref.out);
  INFO("relative norm error " << err);
  CHECK(err <= norm_tolerance(x.dtype()));
}

}  // namespace

TEST_CASE("fused_linear_gelu matches the float64 reference at M, N, K in {1, 7, 127}, both modes, every dtype") {
  manual_seed(151);
  for (DType dt : kFloatTypes)
    for (int64_t m : {1, 7, 127})
      for (int64_t n : {1, 7, 127})
        for (int64_t k : {1, 7, 127})
          for (const char* mode : {"none", "tanh"}) {
            const Operands o = operands(m, n, k, dt);
            check_fused(o.x, o.w, o.b, mode,
                        "MNK " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
          }
}

TEST_CASE("fused_linear_gelu at mid sizes: 64x1000x300 and sizes off every tile") {
  manual_seed(152);
  for (DType dt : kFloatTypes)
    for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{64, 300, 1000}, {33, 129, 65}, {200, 16, 96}})
      for (const char* mode : {"none", "tanh"}) {
        const Operands o = operands(m, n, k, dt);
        check_fused(o.x, o.w, o.b, mode, "mid");
      }
}

TEST_CASE("fused_linear_gelu takes 3-D and 1-D inputs, strided operands and no bias") {
  manual_seed(153);
  for (DType dt : kFloatTypes)
    for (const char* mode : {"none", "tanh"}) {
      const Tensor w = random({6, 5}, dt, -0.8, 0.8), b = random({6}, dt, -0.5, 0.5);
      check_fused(random({2, 3, 5}, dt, -1, 1), w, b, mode, "3-D");
      check_fused(random({2, 1, 4, 5}, dt, -1, 1), w, Tensor(), mode, "4-D, no bias");
      check_fused(random({5}, dt, -1, 1), w, b, mode, "1-D");
      check_fused(random({4, 5}, dt, -1, 1), w, Tensor(), mode, "no bias");
      // Transposed, sliced and expanded inputs; a transposed weight (nn.Linear's after t()).
      check_fused(random_with_layout({4, 5}, Layout::Transposed, dt, -1, 1), w, b, mode, "transposed input");
      check_fused(random_with_layout({4, 5}, Layout::Sliced, dt, -1, 1), w, b, mode, "sliced input");
      check_fused(random_with_layout({4, 5}, Layout::Expanded, dt, -1, 1), w, b, mode, "expanded input");
      check_fused(random({2, 3, 5}, dt, -1, 1).transpose(0, 1), w, b, mode, "3-D input whose rows do not fold");
      check_fused(random({6, 4, 5}, dt, -1, 1).slice(0, 1, 4), w, b, mode, "3-D input sliced along dim 0 (a view)");
      check_fused(random({4, 5}, dt, -1, 1), random({5, 6}, dt, -0.8, 0.8).t(), b, mode, "transposed weight");
      check_fused(random({4, 5}, dt, -1, 1), w, random({12}, dt, -0.5, 0.5).slice(0, 1, 12, 2), mode, "strided bias");
    }
}

TEST_CASE("fused_linear_gelu with zero sizes: no rows, no outputs, and K = 0 (the GELU of the bias)") {
  for (DType dt : kFloatTypes) {
    INFO(dtype_name(dt));
    CHECK(fused_linear_gelu(random({0, 3}, dt), random({4, 3}, dt), random({4}, dt)).sizes() == Shape{0, 4});
    CHECK(fused_linear_gelu(random({2, 0, 3}, dt), random({4, 3}, dt)).sizes() == Shape{2, 0, 4});
    CHECK(fused_linear_gelu(random({5, 3}, dt), random({0, 3}, dt), random({0}, dt)).sizes() == Shape{5, 0});
    for (const char* mode : {"none", "tanh"}) {
      const Tensor b = random({4}, dt, -2, 2);
      check_fused(random({3, 0}, dt), random({4, 0}, dt), b, mode, "K = 0");
      check_close(fused_linear_gelu(random({3, 0}, dt), random({4, 0}, dt), Tensor(), mode),
                  std::vector<double>(12, 0.0), {3, 4});
    }
  }
}

TEST_CASE("fused_linear_gelu agrees with gelu(linear(...)), NaN and Inf included") {
  manual_seed(154);
  for (DType dt : kFloatTypes)
    for (const char* mode : {"none", "tanh"}) {
      INFO(dtype_name(dt) << " " << std::string(mode));
      Tensor x = random({6, 4}, dt, -1, 1), w = random({5, 4}, dt, -1, 1);
      const Tensor b = random({5}, dt, -0.5, 0.5);
      // Row 0 meets +Inf (through positive and negative weights: +-Inf outputs, and GELU(-Inf)
      // is NaN as in PyTorch), row 1 -Inf, row 2 NaN; weight row 3 is +Inf everywhere.
      std::vector<double> vx = values(x), vw = values(w);
      vx[0 * 4 + 1] = kInf;
      vx[1 * 4 + 2] = -kInf;
      vx[2 * 4 + 0] = kNaN;
      for (int64_t k = 0; k < 4; ++k) vw[3 * 4 + k] = kInf;
      vw[0 * 4 + 1] = 0.5;   // output 0 of row 0: +Inf
      vw[0 * 4 + 2] = -0.5;  // output 0 of row 1: +Inf
      x = from_vector(vx, {6, 4}).to(dt);
      w = from_vector(vw, {5, 4}).to(dt);
      const Tensor fused = fused_linear_gelu(x, w, b, mode), unfused = gelu(linear(x, w, b), mode);
      const std::vector<double> f = values(fused), u = values(unfused);
      bool any_nan = false, any_inf = false;
      for (size_t i = 0; i < f.size(); ++i) {
        INFO("element " << i << ": fused " << f[i] << ", unfused " << u[i]);
        CHECK(std::isnan(f[i]) == std::isnan(u[i]));
        CHECK(std::isinf(f[i]) == std::isinf(u[i]));
        if (std::isinf(u[i])) CHECK(f[i] == u[i]);
        any_nan = any_nan || std::isnan(u[i]);
        any_inf = any_inf || std::isinf(u[i]);
      }
      CHECK(any_nan);
      CHECK(any_inf);
      // The finite values agree to the dtype's rounding.
      std::vector<double> ff, uf;
      for (size_t i = 0; i < f.size(); ++i)
        if (std::isfinite(u[i]) && std::isfinite(f[i])) {
          ff.push_back(f[i]);
          uf.push_back(u[i]);
        }
      CHECK(relative_norm_error(ff, uf) <= norm_tolerance(dt));
    }
}

TEST_CASE("fused_linear_gelu writes its pre-activation only when autograd records the call") {
  manual_seed(155);
  const Tensor x = random({3, 4}, kFloat64, -1, 1), w = random({5, 4}, kFloat64, -1, 1),
               b = random({5}, kFloat64, -1, 1);
  // Nothing requires grad: no pre-activation.
  CHECK_FALSE(detail::fused_linear_gelu_outputs(x, w, b, "none").preactivation.defined());
  const Tensor wg = w.detach().clone().requires_grad_();
  {
    NoGradGuard no_grad;  // an input requires grad, but grad mode is off
    CHECK_FALSE(detail::fused_linear_gelu_outputs(x, wg, b, "none").preactivation.defined());
  }
  for (const char* mode : {"none", "tanh"}) {
    const detail::FusedLinearGeluOutputs r = detail::fused_linear_gelu_outputs(x, wg, b, mode);
    REQUIRE(r.preactivation.defined());
    CHECK(r.preactivation.sizes() == Shape{3, 5});
    const FusedReference ref = fused_reference(x, w, b, std::string(mode) == "tanh");
    check_close(r.preactivation, ref.pre, {3, 5});
    check_close(r.out, ref.out, {3, 5});
    CHECK(r.out.requires_grad());
  }
}

TEST_CASE("fused_linear_gelu's record: slots, attribute, fusion role, cost and replay with the pre-activation") {
  const OpDesc& d = op::fused_linear_gelu;
  CHECK(find_op("fused_linear_gelu") == &d);
  REQUIRE(d.inputs.size() == 3);
  CHECK(std::string(d.inputs[0]) == "input");
  CHECK(std::string(d.inputs[1]) == "weight");
  CHECK(std::string(d.inputs[2]) == "bias");
  REQUIRE(d.attrs.size() == 1);
  CHECK(std::string(d.attrs[0].name) == "approximate");
  CHECK(d.attrs[0].kind == AttrKind::String);
  CHECK(d.fusion == FusionRole::Gemm);
  CHECK((d.backward != nullptr));
  CHECK(d.saved == (save_input(0) | save_input(1) | save_output(1)));
  CHECK((op::fused_linear_gelu_backward.backward == nullptr));

  // A recorded call, with autograd on: two outputs, the cost of the GEMM plus the GELU.
  struct Recorder final : OpObserver {
    std::vector<Tensor> inputs, outputs;
    std::vector<AttrValue> attrs;
    OpCost cost;
    void on_op_begin(const OpCall&) override {}
    void on_op_end(const OpCall& call) override {
      if (call.op != &op::fused_linear_gelu) return;
      for (const Tensor* t : call.inputs) inputs.push_back(t != nullptr ? t->detach() : Tensor());
      for (const Tensor& t : call.outputs) outputs.push_back(t.detach().clone());
      attrs.assign(call.attrs.begin(), call.attrs.end());
      cost = op_cost(call);
    }
  } rec;
  manual_seed(156);
  const Tensor x = random({2, 3, 4}), w = random({5, 4}).requires_grad_(), b = random({5});
  add_thread_op_observer(&rec);
  const Tensor y = fused_linear_gelu(x, w, b, "tanh");
  remove_thread_op_observer(&rec);
  REQUIRE(rec.outputs.size() == 2);
  CHECK(rec.outputs[1].sizes() == Shape{2, 3, 5});
  CHECK(attr_string(rec.attrs, 0) == "tanh");
  CHECK(rec.cost.flops == doctest::Approx((2.0 * 4 + 1) * 30));
  CHECK(rec.cost.math == MathKind::Float32);
  // replay under autograd gives both outputs again, equal to the recorded ones.
  const std::vector<Tensor> again = replay(op::fused_linear_gelu, std::vector<Tensor>{x, w, b}, rec.attrs);
  REQUIRE(again.size() == 2);
  CHECK(again[0].equal(rec.outputs[0]));
  CHECK(again[1].equal(rec.outputs[1]));
  NoGradGuard no_grad;
  CHECK(replay(op::fused_linear_gelu, rec.inputs, rec.attrs).size() == 1);
}

TEST_CASE("fused_linear_gelu errors name the op and the offending values") {
  const Tensor x = random({2, 3}), w = random({4, 3}), b = random({4});
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, w, b, "exact"),
                       doctest::Contains("fused_linear_gelu: approximate must be \"none\" or \"tanh\", got \"exact\""),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(Tensor(), w), doctest::Contains("fused_linear_gelu: argument 'input'"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, Tensor()), doctest::Contains("fused_linear_gelu: argument 'weight'"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, random({4, 3}, kFloat64)),
                       doctest::Contains("fused_linear_gelu: expected input and weight to have the same dtype, but got "
                                         "float32 and float64"),
                       Error);
  CHECK_THROWS_WITH_AS(
      fused_linear_gelu(random({2, 3}, kInt64), random({4, 3}, kInt64)),
      doctest::Contains("fused_linear_gelu: unsupported dtype int64 (supported: float16, bfloat16, float32, float64)"),
      Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, random({4, 3, 1})),
                       doctest::Contains("fused_linear_gelu: weight must be 2-D [out_features, in_features], got shape "
                                         "[4, 3, 1]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(random({}), random({4, 1})),
                       doctest::Contains("fused_linear_gelu: input must have at least 1 dimension"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(random({2, 5}), w),
                       doctest::Contains("fused_linear_gelu: input's last dimension (5) does not match in_features "
                                         "(3): input shape [2, 5], weight shape [4, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, w, random({3})),
                       doctest::Contains("fused_linear_gelu: bias must have shape [4] (out_features), got [3]"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, w, random({1, 4})),
                       doctest::Contains("fused_linear_gelu: bias must have shape [4] (out_features), got [1, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu(x, w, random({4}, kFloat64)),
                       doctest::Contains("fused_linear_gelu: expected bias to have dtype float32, but got float64"),
                       Error);
  // 2^40 rows through 2^32 outputs: the element count overflows before anything is allocated.
  const Tensor huge_x = random({1, 1}).expand({int64_t{1} << 40, 1});
  const Tensor huge_w = random({1, 1}).expand({int64_t{1} << 32, 1});
  CHECK_THROWS_WITH_AS(fused_linear_gelu(huge_x, huge_w),
                       doctest::Contains("fused_linear_gelu: input (shape [1099511627776, 1]) and weight (shape "
                                         "[4294967296, 1]) need an output of shape [1099511627776, 4294967296], which "
                                         "has too many elements"),
                       Error);
}
