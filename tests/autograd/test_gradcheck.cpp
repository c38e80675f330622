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

TEST_CASE("a module's gradients against finite differences: nn::MLP in float64, every parameter") {
  manual_seed(8);
  nn::MLP mlp({3, 5, 2}, nn::Activation::GELU);
  mlp.to(kFloat64);
  const std::vector<Tensor> params = mlp.parameters();
  std::vector<Tensor> inputs = {random({4, 3}, kFloat64).requires_grad_()};
  inputs.insert(inputs.end(), params.begin(), params.end());
  // The function reads the parameters through the module: gradcheck hands it perturbed
  // copies, whose values it writes into the module first (and the original values back when
  // given the parameters themselves, so every evaluation starts from the same module).
  std::vector<Tensor> original;
  for (const Tensor& p : params) original.push_back(p.detach().clone());
  auto fn = [&](const std::vector<Tensor>& in) {
    {
      NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i)
        Tensor(params[i]).copy_(in[1 + i].is_same(params[i]) ? original[i] : in[1 + i]);
    }
    return mlp(in[0]);
  };
  CHECK_NOTHROW(autograd::gradcheck(fn, inputs));
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
