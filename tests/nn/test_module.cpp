// nn::Module basics: registration, dotted names, repr, to(dtype), train/eval.
#include "testing.h"

using namespace kiln;

TEST_CASE("MLP prints like PyTorch and names its parameters with dots") {
  nn::MLP mlp({.sizes = {4, 8, 2}, .activation = nn::Activation::GELU});
  CHECK(mlp.repr() ==
        "MLP(\n"
        "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (1): GELU(approximate='none')\n"
        "  (2): Linear(in_features=8, out_features=2, bias=True)\n"
        ")");
  std::vector<std::string> names;
  for (auto& [n, p] : mlp.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
}
