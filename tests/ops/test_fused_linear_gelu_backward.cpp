// fused_linear_gelu's backward on the CPU: the backward op against float64 references written
// here (both GELU modes, every floating dtype, 3-D and strided operands, each subset of the
// gradients), gradients through autograd against the unfused linear -> gelu path, one backward
// op call per fused node computing only what the inputs need, a second derivative refused
// with a clear error, and every error of the backward op.
#include <cmath>
#include <string>

#include "ops/fused_linear_gelu_reference.h"
#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

// The backward op's message prefix, joined to the literals below.
#define BACKWARD_OP "fused_linear_gelu_backward: "

namespace {

void check_gradient(const Tensor& got, const std::vector<double>& want, const Shape& shape, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(got.sizes() == shape);
  const double err = relative_norm_error(values(got), want);
  INFO("relative norm error " << err);
  CHECK(err <= norm_tolerance(got.dtype()));
}

// Records the calls of one op (its inputs' requires_grad flags and its attributes).
struct OpCounter final : OpObserver {
  const OpDesc* op;
  std::vector<std::vector<AttrValue>> attrs;
  explicit OpCounter(const OpDesc& d) : op(&d) {}
  void on_op_begin(const OpCall& call) override {
    if (call.op == op) attrs.emplace_back(call.attrs.begin(), call.attrs.end());
  }
  void on_op_end(const OpCall&) override {}
};

}  // namespace

TEST_CASE("fused_linear_gelu_backward matches the float64 reference, every dtype and mode") {
  manual_seed(161);
  for (DType dt : kFloatTypes)
    for (const char* mode : {"none", "tanh"})
      for (const auto& [lead, n, k] : std::vector<std::tuple<Shape, int64_t, int64_t>>{
               {{7}, 1, 1}, {{1}, 7, 127}, {{127}, 7, 7}, {{2, 3}, 5, 4}, {{64}, 100, 30}}) {
        Shape xs = lead, hs = lead;
        xs.push_back(k);
        hs.push_back(n);
        const double s = 1.0 / std::sqrt(static_cast<double>(k));
        const Tensor x = random(xs, dt, -1, 1), w = random({n, k}, dt, -2 * s, 2 * s);
        const Tensor h = random(hs, dt, -3, 3), g = random(hs, dt, -1, 1);
        const std::string what = std::string(mode) + " " + shape_str(xs) + " -> " + shape_str(hs);
        INFO(dtype_name(dt) << " " << what);
        const FusedLinearGeluGrads r = fused_linear_gelu_backward(g, x, w, h, mode);
        const BackwardReference ref = backward_reference(g, x, w, values(h), std::string(mode) == "tanh");
        check_gradient(r.input, ref.input, xs, "grad input");
        check_gradient(r.weight, ref.weight, {n, k}, "grad weight");
        check_gradient(r.bias, ref.bias, {n}, "grad bias");
      }
}

TEST_CASE("fused_linear_gelu_backward computes only the gradients asked for, from strided operands") {
  manual_seed(162);
  const Tensor x = random_with_layout({6, 4}, Layout::Transposed, kFloat64, -1, 1);
  const Tensor w = random_with_layout({5, 4}, Layout::Sliced, kFloat64, -1, 1);
  const Tensor h = random_with_layout({6, 5}, Layout::Transposed, kFloat64, -2, 2);
  const Tensor g = random_with_layout({6, 5}, Layout::Expanded, kFloat64, -1, 1);
  const BackwardReference ref = backward_reference(g, x, w, values(h), false);
  for (int mask = 0; mask < 8; ++mask) {
    INFO("mask " << mask);
    const bool gi = (mask & 1) != 0, gw = (mask & 2) != 0, gb = (mask & 4) != 0;
    const FusedLinearGeluGrads r = fused_linear_gelu_backward(g, x, w, h, "none", gi, gw, gb);
    CHECK(r.input.defined() == gi);
    CHECK(r.weight.defined() == gw);
    CHECK(r.bias.defined() == gb);
    if (gi) check_close(r.input, ref.input, {6, 4});
    if (gw) check_close(r.weight, ref.weight, {5, 4});
    if (gb) check_close(r.bias, ref.bias, {5});
  }
  // No rows: zero weight and bias gradients, an empty input gradient.
  const FusedLinearGeluGrads z =
      fused_linear_gelu_backward(random({0, 5}), random({0, 4}), random({5, 4}), random({0, 5}), "tanh");
  CHECK(z.input.sizes() == Shape{0, 4});
  check_close(z.weight, std::vector<double>(20, 0.0), {5, 4});
  check_close(z.bias, std::vector<double>(5, 0.0), {5});
}

TEST_CASE("gradients through fused_linear_gelu equal the unfused linear -> gelu path's") {
  manual_seed(163);
  for (DType dt : {kFloat32, kFloat64, kBFloat16})
    for (const char* mode : {"none", "tanh"})
      for (bool with_bias : {true, false}) {
        INFO(dtype_name(dt) << " " << std::string(mode) << (with_bias ? " bias" : " no bias"));
        const Tensor x0 = random({2, 3, 8}, dt, -1, 1), w0 = random({6, 8}, dt, -0.7, 0.7),
                     b0 = random({6}, dt, -0.5, 0.5), gy = random({2, 3, 6}, dt, -1, 1);
        auto run = [&](bool fused) {
          std::vector<Tensor> p = {x0.detach().clone().requires_grad_(), w0.detach().clone().requires_grad_(),
                                   with_bias ? b0.detach().clone().requires_grad_() : Tensor()};
          const Tensor y = fused ? fused_linear_gelu(p[0], p[1], p[2], mode) : gelu(linear(p[0], p[1], p[2]), mode);
          y.backward(gy);
          return p;
        };
        const std::vector<Tensor> f = run(true), u = run(false);
        // 16-bit: the unfused GEMM rounds the pre-activation first; both paths round dH once.
        const Tolerance tol = dt == kBFloat16 ? Tolerance{2e-2, 2e-2} : tolerance(dt);
        for (size_t i = 0; i < 3; ++i) {
          if (!f[i].defined()) continue;
          INFO("parameter " << i);
          REQUIRE(f[i].grad().defined());
          check_close(f[i].grad(), values(u[i].grad()), u[i].sizes(), tol);
        }
      }
}

TEST_CASE("one backward op per fused node, asked only for the gradients its inputs need") {
  manual_seed(164);
  const Tensor x = random({4, 3}, kFloat64, -1, 1), b = random({5}, kFloat64);
  const Tensor w = random({5, 3}, kFloat64, -1, 1).requires_grad_();
  OpCounter counter(op::fused_linear_gelu_backward);
  const Tensor y = fused_linear_gelu(x, w, b, "tanh");
  add_thread_op_observer(&counter);
  sum(y).backward();
  remove_thread_op_observer(&counter);
  REQUIRE(counter.attrs.size() == 1);
  CHECK(attr_string(counter.attrs[0], 0) == "tanh");
  CHECK_FALSE(attr_bool(counter.attrs[0], 1));  // x needs none
  CHECK(attr_bool(counter.attrs[0], 2));        // w does
  CHECK_FALSE(attr_bool(counter.attrs[0], 3));  // b needs none
  const FusedReference fwd = fused_reference(x, w.detach(), b, true);
  const BackwardReference ref = backward_reference(ones({4, 5}, kFloat64), x, w.detach(), fwd.pre, true);
  check_close(w.grad(), ref.weight, {5, 3});
}

TEST_CASE("a second derivative through fused_linear_gelu is a clear error") {
  const Tensor x = random({2, 3}, kFloat64).requires_grad_(), w = random({4, 3}, kFloat64).requires_grad_();
  const std::vector<Tensor> g = autograd::grad({sum(fused_linear_gelu(x, w))}, {x}, {}, false, /*create_graph=*/true);
  REQUIRE(g[0].requires_grad());
  CHECK_THROWS_WITH_AS(sum(g[0]).backward(), doctest::Contains("no backward formula"), Error);
}

TEST_CASE("fused_linear_gelu_backward errors name the op and the offending values") {
  const Tensor g = random({2, 4}), x = random({2, 3}), w = random({4, 3}), h = random({2, 4});
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, w, h, "erf"),
                       doctest::Contains(BACKWARD_OP "approximate must be \"none\" or \"tanh\", got \"erf\""),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(Tensor(), x, w, h, "none"),
                       doctest::Contains(BACKWARD_OP "argument 'grad_output'"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, Tensor(), w, h, "none"),
                       doctest::Contains(BACKWARD_OP "argument 'input'"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, Tensor(), h, "none"),
                       doctest::Contains(BACKWARD_OP "argument 'weight'"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, w, Tensor(), "none"),
                       doctest::Contains(BACKWARD_OP "argument 'preactivation'"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, w, h.to(kFloat64), "none"),
                       doctest::Contains(BACKWARD_OP "expected grad_output, input, weight and preactivation of "
                                                           "one floating dtype, got float32, float32, float32 and "
                                                           "float64"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g.to(kInt64), x.to(kInt64), w.to(kInt64), h.to(kInt64), "none"),
                       doctest::Contains(BACKWARD_OP "expected grad_output, input, weight and preactivation of "
                                                           "one floating dtype, got int64"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, random({4, 2}), h, "none"),
                       doctest::Contains(BACKWARD_OP "expected input [..., in_features] and weight "
                                                           "[out_features, in_features], got shapes [2, 3] and [4, 2]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, random({4, 3, 1}), h, "none"),
                       doctest::Contains(BACKWARD_OP "expected input [..., in_features]"), Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(random({2, 5}), x, w, h, "none"),
                       doctest::Contains(BACKWARD_OP "grad_output and preactivation must have shape [2, 4] (input "
                                                           "[2, 3] through weight [4, 3]), got [2, 5] and [2, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_gelu_backward(g, x, w, random({3, 4}), "none"),
                       doctest::Contains("[2, 3] through weight [4, 3]), got [2, 4] and [3, 4]"), Error);
}
