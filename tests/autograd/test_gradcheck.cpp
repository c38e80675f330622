// Every differentiable op's backward formula against float64 central differences on the
// CPU (autograd::gradcheck), and gradcheck itself catching a wrong formula.
#include <set>

#include "gradcheck_all.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("every op with a backward formula has a gradcheck sample") {
  std::set<std::string> checked;
  for (const OpSample& s : op_samples(Device::cpu(), kFloat64))
    if (!s.differentiable.empty()) checked.insert(s.op);
  for (const OpDesc* op : all_ops()) {
    if (op->backward == nullptr || op->has(kOpNonDifferentiable)) continue;
    if (op->has(kOpFactory)) continue;
    const bool fills = std::string(op->name) == "fill_" || std::string(op->name) == "zero_" ||
                       std::string(op->name) == "uniform_" || std::string(op->name) == "normal_";
    if (fills || std::string(op->name) == "pin_memory" || std::string(op->name) == "_pin_memory" ||
        std::string(op->name) == "_to_copy" || std::string(op->name) == "to")
      continue;  // overwrite their input (no gradient flows), need a GPU, or are checked in test_engine.cpp
    INFO("op " << std::string(op->name));
    CHECK(checked.count(op->name) == 1);
  }
}

TEST_CASE("gradcheck passes for every differentiable op (float64, CPU, strided inputs included)") {
  for (const OpSample& s : op_samples(Device::cpu(), kFloat64)) {
    INFO("op " << s.op);
    CHECK_NOTHROW(gradcheck_sample(s));
  }
}

TEST_CASE("gradcheck catches a wrong gradient") {
  // A hook doubles the gradient reaching x: analytical = 2 * numerical.
  const Tensor x = random({3}, kFloat64).requires_grad_();
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = mul(in[0], 1.0);
    if (y.requires_grad()) y.register_hook([](const Tensor& g) { return mul(g, 2.0); });
    return exp(y);
  };
  CHECK_THROWS_WITH_AS(autograd::gradcheck(fn, {x}), doctest::Contains("analytical gradient"), Error);
  CHECK_THROWS_WITH_AS(autograd::gradcheck(fn, {random({3}, kFloat32).requires_grad_()}),
                       doctest::Contains("gradcheck needs float64 inputs"), Error);
  CHECK_THROWS_WITH_AS(autograd::gradcheck(fn, {random({3}, kFloat64)}), doctest::Contains("no input requires grad"),
                       Error);
}
