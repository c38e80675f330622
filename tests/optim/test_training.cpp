// A short training run end to end (autograd + AdamW + cross_entropy): an MLP learns a
// deterministic four-class problem (the quadrant of a 2-D point), and the loss falls below a
// fixed bound; the same run twice gives the same bits.
#include "testing.h"

using namespace kiln;

namespace {
// 256 points in [-1, 1)^2, labelled by quadrant; returns the final loss.
double train_quadrants(int steps) {
  manual_seed(2026);
  const Tensor x = mul(sub(rand({256, 2}, kFloat64), 0.5), 2.0);
  const Tensor right = gt(x.select(1, 0), 0).to(kInt64), up = gt(x.select(1, 1), 0).to(kInt64);
  const Tensor y = add(mul(up, 2), right);
  nn::MLP model({2, 32, 4}, nn::Activation::GELU);
  model.to(kFloat64);
  optim::AdamW opt(model.parameters(), {.lr = 3e-2});
  double loss = 0;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    const Tensor l = cross_entropy(model(x), y);
    l.backward();
    opt.step();
    loss = l.item<double>();
  }
  return loss;
}
}  // namespace

TEST_CASE("a short deterministic training run drives the loss below a fixed bound") {
  const double first = train_quadrants(1);
  const double last = train_quadrants(300);
  CHECK(first > 1.0);   // about log(4) = 1.386 at initialisation
  MESSAGE("quadrant MLP: loss " << first << " after 1 step, " << last << " after 300");
  CHECK(last < 0.15);
  CHECK(train_quadrants(300) == last);  // bit for bit: one summation order per machine
}
