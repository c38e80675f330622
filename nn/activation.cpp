// Activation and dropout layers: thin wrappers over the ops, with PyTorch's reprs.
#include "activation.h"

#include "../ops/dropout.h"
#include "../ops/unary.h"

namespace kiln::nn {

namespace {
// A double as Python's repr writes a float: shortest round-trip digits, and a ".0" on
// integral values ("0.0", not fmt's "0"), so Dropout(0.0) prints as PyTorch's does.
std::string python_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be \"none\" or \"tanh\", got \"{}\"",
             approximate);
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return fmt::format("approximate='{}'", approximate); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Dropout::Dropout(double prob) : Module("Dropout"), p(prob) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability has to be between 0 and 1, but got {}", p);
}
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }
std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=False", python_float(p)); }

}  // namespace kiln::nn
