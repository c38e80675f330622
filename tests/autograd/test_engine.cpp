// The autograd engine and its user API on the CPU: gradients of a small network against a
// float64 reference, accumulation, retain_graph, grad_fn names, grad mode per thread,
// detach, autograd::grad, hooks, in-place checks (version counter, leaves, views),
// broadcasting and dtype conversion of gradients, the profiler's backward rows, and a flat
// memory footprint over many training steps.
#include <thread>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
Tensor leaf(const Shape& s, DType dt = kFloat64) { return random(s, dt).requires_grad_(); }
void near(const Tensor& t, const std::vector<double>& expected) { check_close(t, expected, t.sizes()); }
}  // namespace

TEST_CASE("backward of sum((x W^T + b)^2) matches the float64 formula") {
  const Tensor x = random({4, 3}, kFloat64), w = leaf({2, 3}), b = leaf({2});
  const Tensor y = linear(x, w, b);
  const Tensor loss = sum(mul(y, y));
  loss.backward();
  // dL/dy = 2y; dW = 2 y^T x; db = 2 sum_rows(y).
  const auto yv = y.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> dw(6, 0.0), db(2, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 2; ++o) {
      db[o] += 2 * yv[i * 2 + o];
      for (int k = 0; k < 3; ++k) dw[o * 3 + k] += 2 * yv[i * 2 + o] * xv[i * 3 + k];
    }
  REQUIRE(w.grad().defined());
  near(w.grad(), dw);
  near(b.grad(), db);
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("gradients accumulate across backward calls; retain_graph keeps the graph") {
  Tensor x = leaf({3});
  const Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  const auto first = x.grad().to_vector<double>();
  y.backward();
  const auto second = x.grad().to_vector<double>();
  for (size_t i = 0; i < first.size(); ++i) CHECK(second[i] == doctest::Approx(2 * first[i]));
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("backward through the graph a second time"), Error);
  x.mutable_grad() = Tensor();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("grad_fn names, leaves and requires_grad as in PyTorch") {
  const Tensor x = leaf({2, 3}, kFloat32), w = leaf({4, 3}, kFloat32), b = leaf({4}, kFloat32);
  Tensor y = linear(x, w, b);
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "AddmmBackward0");
  CHECK(gelu(y).grad_fn()->name() == "GeluBackward0");
  CHECK(sum(y).grad_fn()->name() == "SumBackward0");
  CHECK(log_softmax(y, 1).grad_fn()->name() == "LogSoftmaxBackward0");
  CHECK(y.t().grad_fn()->name() == "TBackward0");
  CHECK(y.to(kFloat64).grad_fn()->name() == "ToCopyBackward0");
  // to()'s gradient converts back: float64 grad of a float32 leaf arrives as float32.
  const Tensor xd = leaf({3}, kFloat32);
  sum(mul(xd.to(kFloat64), xd.to(kFloat64))).backward();
  near(xd.grad(), mul(xd.detach(), 2.0).to_vector<double>());
  CHECK(xd.grad().dtype() == kFloat32);
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.requires_grad());
  CHECK_FALSE(argmax(y, 1).requires_grad());  // integer result
  CHECK_FALSE(gt(y, 0).requires_grad());
  const Tensor c = random({2, 3});
  CHECK_FALSE(add(c, 1).requires_grad());
  CHECK(add(c, 1).grad_fn() == nullptr);
  CHECK_THROWS_WITH_AS(random({2}, kInt64).requires_grad_(), doctest::Contains("only floating point"), Error);
  CHECK_THROWS_WITH_AS(y.requires_grad_(false), doctest::Contains("only change requires_grad flags of leaf"), Error);
}

TEST_CASE("NoGradGuard switches recording off on its own thread only") {
  const Tensor x = leaf({3}, kFloat32);
  Tensor on_other_thread;
  {
    NoGradGuard no_grad;
    CHECK_FALSE(is_grad_enabled());
    CHECK_FALSE(mul(x, 2).requires_grad());
    std::thread t([&] { on_other_thread = mul(x, 2); });
    t.join();
    {
      EnableGradGuard enable;
      CHECK(mul(x, 2).requires_grad());
    }
  }
  CHECK(is_grad_enabled());
  CHECK(on_other_thread.requires_grad());
}

TEST_CASE("detach shares the data and drops the history") {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, 2);
  const Tensor d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.is_alias_of(y));
  CHECK(d.equal(y));
  Tensor e = mul(x, 3);
  e.detach_();
  CHECK_FALSE(e.requires_grad());
}

TEST_CASE("autograd::grad returns gradients without touching .grad()") {
  const Tensor x = leaf({3}), z = leaf({2});
  const Tensor y = sum(mul(x, x));
  const std::vector<Tensor> g = autograd::grad({y}, {x}, {}, /*retain_graph=*/true);
  near(g[0], mul(x.detach(), 2.0).to_vector<double>());
  CHECK_FALSE(x.grad().defined());
  CHECK_THROWS_WITH_AS(autograd::grad({y}, {z}, {}, true), doctest::Contains("not have been used in the graph"), Error);
  const std::vector<Tensor> unused = autograd::grad({y}, {z}, {}, true, false, /*allow_unused=*/true);
  CHECK_FALSE(unused[0].defined());
  // Second order: d/dx of sum(2x * 3) through create_graph.
  const std::vector<Tensor> g1 = autograd::grad({sum(mul(x, x))}, {x}, {}, false, /*create_graph=*/true);
  const std::vector<Tensor> g2 = autograd::grad({sum(mul(g1[0], 3.0))}, {x});
  near(g2[0], std::vector<double>(3, 6.0));
}

TEST_CASE("hooks see and may replace gradients; retain_grad keeps a non-leaf's") {
  const Tensor x = leaf({3});
  Tensor seen;
  x.register_hook([&](const Tensor& g) {
    seen = g;
    return mul(g, 10.0);
  });
  const Tensor h = mul(x, 2);
  h.retain_grad();
  CHECK(h.retains_grad());
  sum(h).backward();
  REQUIRE(seen.defined());
  near(seen, std::vector<double>(3, 2.0));
  near(x.grad(), std::vector<double>(3, 20.0));
  near(h.grad(), std::vector<double>(3, 1.0));
  CHECK_THROWS_WITH_AS(random({2}).register_hook([](const Tensor& g) { return g; }),
                       doctest::Contains("doesn't require gradient"), Error);
}

TEST_CASE("in place: a modified saved tensor, a leaf, a view are errors, never wrong gradients") {
  const Tensor x = leaf({4});
  Tensor y = exp(x);  // saves its output
  Tensor loss = sum(y);
  Tensor z = sum(mul(y, y));
  y.masked_fill_(gt(y, 1.0), 0.0);
  CHECK_THROWS_WITH_AS(z.backward(), doctest::Contains("modified by an inplace operation"), Error);
  Tensor x2 = leaf({3});
  CHECK_THROWS_WITH_AS(x2.fill_(1), doctest::Contains("leaf Variable that requires grad"), Error);
  {
    NoGradGuard no_grad;  // optimizers update parameters in place this way
    CHECK_NOTHROW(x2.fill_(1));
  }
  Tensor base = mul(leaf({2, 3}), 1.0);
  Tensor view = base.select(0, 0);
  CHECK_THROWS_WITH_AS(view.masked_fill_(gt(view, 0.0), 1.0), doctest::Contains("view of a tensor that requires grad"),
                       Error);
  Tensor w = mul(leaf({3}), 1.0);
  CHECK_THROWS_WITH_AS(clamp_(w, 0.0, std::nullopt), doctest::Contains("no backward formula"), Error);
  // An in-place op on a non-leaf records, and its gradient is right.
  const Tensor a = leaf({4});
  Tensor m = mul(a, 3.0);
  m.masked_fill_(gt(a.detach(), 0.0), 0.0);
  sum(m).backward();
  const auto av = a.to_vector<double>(), ag = a.grad().to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) CHECK(ag[i] == (av[i] > 0 ? 0.0 : 3.0));
  CHECK(m.grad_fn()->name() == "MaskedFillBackward0");
}

TEST_CASE("broadcast gradients are summed to each input's shape and converted to its dtype") {
  const Tensor a = leaf({3, 1}), b = leaf({4}, kFloat32);
  const Tensor y = add(a, b);  // float64 [3, 4]
  sum(y).backward();
  CHECK(a.grad().sizes() == Shape{3, 1});
  CHECK(b.grad().sizes() == Shape{4});
  CHECK(b.grad().dtype() == kFloat32);
  near(a.grad(), std::vector<double>(3, 4.0));
  near(b.grad(), std::vector<double>(4, 3.0));
}

TEST_CASE("backward of a non-scalar needs a gradient of its shape") {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, 2);
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("only for scalar outputs"), Error);
  CHECK_THROWS_WITH_AS(y.backward(ones({2}, kFloat64)), doctest::Contains("mismatch in shape"), Error);
  y.backward(full({3}, 0.5, kFloat64));
  near(x.grad(), std::vector<double>(3, 1.0));
  CHECK_THROWS_WITH_AS(random({2}).sum().backward(), doctest::Contains("does not require grad"), Error);
}

TEST_CASE("the profiler shows backward nodes as PyTorch's evaluate_function rows") {
  const Tensor x = random({8, 4}, kFloat32), w = leaf({3, 4}, kFloat32), b = leaf({3}, kFloat32);
  profiler::Profiler prof(profiler::ProfilerOptions{});
  prof.start();
  sum(linear(x, w, b)).backward();
  prof.stop();
  bool addmm_row = false, mm_under = false;
  const auto averages = prof.key_averages();
  for (const auto& row : averages.rows()) {
    if (row.key == "autograd::engine::evaluate_function: AddmmBackward0") addmm_row = true;
    if (row.key == "kiln::mm") mm_under = true;
  }
  CHECK(addmm_row);
  CHECK(mm_under);
}

TEST_CASE("linear's weight gradient arrives contiguous, with no copy into .grad()") {
  // addmm's mat2 is weight.t(); its gradient is computed as (g^T x)^T so that the weight
  // receives a contiguous tensor it keeps (a clone per weight per step before).
  const Tensor x = random({5, 4}, kFloat64), w = leaf({3, 4}), b = leaf({3});
  profiler::Profiler prof(profiler::ProfilerOptions{});
  prof.start();
  const Tensor y = linear(x, w, b);
  sum(mul(y, y)).backward();
  prof.stop();
  int copies = 0;
  const auto averages = prof.key_averages();
  for (const auto& row : averages.rows())
    if (row.key == "kiln::clone" || row.key == "kiln::copy_" || row.key == "kiln::contiguous") copies += 1;
  CHECK(copies == 0);
  REQUIRE(w.grad().defined());
  CHECK(w.grad().is_contiguous());
  // d/dW sum(y*y) = 2 y^T x.
  const auto yv = y.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> dw(12, 0.0);
  for (int i = 0; i < 5; ++i)
    for (int o = 0; o < 3; ++o)
      for (int k = 0; k < 4; ++k) dw[o * 4 + k] += 2 * yv[i * 3 + o] * xv[i * 4 + k];
  near(w.grad(), dw);
}

TEST_CASE("1000 training steps keep memory_allocated flat: saved tensors go with the graph") {
  manual_seed(3);
  nn::MLP mlp({16, 32, 4});
  const Tensor x = randn({8, 16});
  const Tensor target = from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}, {8});
  auto step = [&] {
    for (Tensor& p : mlp.parameters()) p.mutable_grad() = Tensor();
    cross_entropy(mlp(x), target).backward();
  };
  for (int i = 0; i < 5; ++i) step();
  const int64_t settled = memory_stats(Device::cpu()).at("allocated_bytes.all.current");
  for (int i = 0; i < 1000; ++i) step();
  CHECK(memory_stats(Device::cpu()).at("allocated_bytes.all.current") == settled);
}
