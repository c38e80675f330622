// Post-accumulate-grad hooks (Tensor::register_post_accumulate_grad_hook) and end-of-backward
// callbacks (autograd::queue_callback), the two engine facilities DistributedDataParallel is
// built on: hooks run once per backward per leaf, right after .grad() was written, in the
// order gradients become ready; callbacks run after the whole graph.
#include <algorithm>
#include <string>
#include <vector>

#include "testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {
Tensor leaf(const Shape& s, DType dt = kFloat64) { return random(s, dt).requires_grad_(); }

void same_values(const Tensor& a, const Tensor& b) {
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  check_close(a, b.to_vector<double>(), b.sizes());
}

// A two-layer network whose loss the tests differentiate.
struct TwoLayers {
  Tensor x = random({5, 4}, kFloat64);
  Tensor w1 = leaf({3, 4}), b1 = leaf({3}), w2 = leaf({2, 3}), b2 = leaf({2});
  Tensor loss() const { return sum(mul(linear(tanh(linear(x, w1, b1)), w2, b2), 1.5)); }
};
}  // namespace

TEST_CASE("post-accumulate hooks run once per leaf, after .grad() is written, last layer first") {
  TwoLayers net;
  // The gradients the hooks must see, computed without touching .grad().
  const std::vector<Tensor> expected = autograd::grad({net.loss()}, {net.w1, net.b1, net.w2, net.b2});
  std::vector<std::string> order;
  std::vector<Tensor> seen(4);
  const std::vector<std::pair<std::string, Tensor>> params = {
      {"w1", net.w1}, {"b1", net.b1}, {"w2", net.w2}, {"b2", net.b2}};
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].second;
    // (Not a copy of p: a hook stored in p that holds p would keep it alive forever.)
    p.register_post_accumulate_grad_hook([&, i, impl = p.unsafe_impl()](const Tensor& param) {
      CHECK(param.unsafe_impl() == impl);  // the hook receives the leaf itself
      order.push_back(params[i].first);
      seen[i] = param.grad().clone();  // .grad() is already written when the hook runs
    });
  }
  net.loss().backward();
  REQUIRE(order.size() == 4);
  // The second layer's gradients become ready before the first layer's.
  const auto pos = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  CHECK(pos("w2") < pos("w1"));
  CHECK(pos("b2") < pos("w1"));
  CHECK(pos("w2") < pos("b1"));
  CHECK(pos("b2") < pos("b1"));
  for (size_t i = 0; i < 4; ++i) same_values(seen[i], expected[i]);
}

TEST_CASE("a leaf used several times gets one hook call per backward; accumulation shows in .grad()") {
  const Tensor x = leaf({4});
  int calls = 0;
  std::vector<Tensor> seen;
  x.register_post_accumulate_grad_hook([&](const Tensor& p) {
    ++calls;
    seen.push_back(p.grad().clone());
  });
  // x appears three times: the engine sums its gradients before AccumulateGrad runs.
  const auto f = [&] { return sum(add(mul(x, x), mul(x, 3.0))); };
  f().backward();
  CHECK(calls == 1);
  f().backward();  // accumulates into .grad(): the hook sees the sum of both passes
  CHECK(calls == 2);
  const std::vector<double> xv = x.detach().to_vector<double>();
  std::vector<double> once(xv.size()), twice(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    once[i] = 2 * xv[i] + 3;
    twice[i] = 2 * once[i];
  }
  REQUIRE(seen.size() == 2);
  check_close(seen[0], once, {4});
  check_close(seen[1], twice, {4});
  check_close(x.grad(), twice, {4});
}

TEST_CASE("post-accumulate hooks: several per leaf in order, removal by key, not run by autograd::grad") {
  const Tensor x = leaf({3});
  std::vector<int> calls;
  const uint64_t first = x.register_post_accumulate_grad_hook([&](const Tensor&) { calls.push_back(1); });
  const uint64_t second = x.register_post_accumulate_grad_hook([&](const Tensor&) { calls.push_back(2); });
  CHECK(first != second);
  sum(exp(x)).backward();
  CHECK(calls == std::vector<int>{1, 2});
  // autograd::grad returns gradients without accumulating: no hook runs.
  const auto g = autograd::grad({sum(exp(x))}, {x});
  CHECK(g[0].defined());
  CHECK(calls == std::vector<int>{1, 2});
  CHECK(x.remove_post_accumulate_grad_hook(first));
  CHECK_FALSE(x.remove_post_accumulate_grad_hook(first));
  CHECK_FALSE(leaf({2}).remove_post_accumulate_grad_hook(second));
  sum(exp(x)).backward();
  CHECK(calls == std::vector<int>{1, 2, 2});
  // A hook may remove itself while running.
  uint64_t self = 0;
  int self_calls = 0;
  self = x.register_post_accumulate_grad_hook([&](const Tensor& p) {
    ++self_calls;
    CHECK(p.remove_post_accumulate_grad_hook(self));
  });
  sum(exp(x)).backward();
  sum(exp(x)).backward();
  CHECK(self_calls == 1);
}

TEST_CASE("register_post_accumulate_grad_hook refuses non-leaves, tensors without grad, empty hooks") {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH_AS(y.register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("cannot be registered on non-leaf tensors (grad_fn MulBackward0)"), Error);
  CHECK_THROWS_WITH_AS(random({2}).register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
                                         "doesn't require gradient"),
                       Error);
  CHECK_THROWS_WITH_AS(Tensor().register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("register_post_accumulate_grad_hook: the tensor is undefined"), Error);
  CHECK_THROWS_WITH_AS(x.register_post_accumulate_grad_hook(nullptr),
                       doctest::Contains("register_post_accumulate_grad_hook: the hook is empty"), Error);
}

TEST_CASE("queue_callback runs after the whole graph, in order, callbacks queued by callbacks included") {
  TwoLayers net;
  std::vector<std::string> events;
  int hooks_run = 0;
  for (const Tensor& p : {net.w1, net.b1, net.w2, net.b2})
    p.register_post_accumulate_grad_hook([&](const Tensor&) {
      if (hooks_run++ == 0) {
        // Queued from the first hook: runs once every leaf has its gradient.
        autograd::queue_callback([&] {
          events.push_back(fmt::format("first after {} hooks", hooks_run));
          autograd::queue_callback([&] { events.push_back("queued by a callback"); });
        });
        autograd::queue_callback([&] { events.push_back("second"); });
      }
    });
  net.loss().backward();
  CHECK(events == std::vector<std::string>{"first after 4 hooks", "second", "queued by a callback"});
  // The queue is per pass: nothing is left over for the next backward.
  events.clear();
  hooks_run = 1;  // the hooks queue nothing this time
  net.loss().backward();
  CHECK(events.empty());
}

TEST_CASE("queue_callback outside a backward pass, or with an empty callback, is an error") {
  CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}),
                       doctest::Contains("queue_callback: no backward pass is running on this thread"), Error);
  const Tensor x = leaf({2});
  x.register_hook([](const Tensor& g) {
    CHECK_THROWS_WITH_AS(autograd::queue_callback(nullptr), doctest::Contains("queue_callback: the callback is empty"),
                         Error);
    return g;
  });
  sum(x).backward();
  // A pass that ended (even by an exception) leaves no queue behind.
  const Tensor y = leaf({2});
  y.register_post_accumulate_grad_hook([](const Tensor&) {
    autograd::queue_callback([] { KILN_FAIL("callback: fails on purpose"); });
  });
  CHECK_THROWS_WITH_AS(sum(y).backward(), doctest::Contains("callback: fails on purpose"), Error);
  CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}), doctest::Contains("no backward pass is running"), Error);
}
