// nn::MLP. The last linear layer has no activation and no dropout after it: an MLP's
// output is a prediction, not a hidden feature.
#include "mlp.h"

#include "../tensor/shape.h"
#include "activation.h"
#include "linear.h"

namespace kiln::nn {

namespace {
std::shared_ptr<Module> make_activation(Activation a) {
  switch (a) {
    case Activation::ReLU: return std::make_shared<ReLU>();
    case Activation::GELU: return std::make_shared<GELU>("none");
    case Activation::GELUTanh: return std::make_shared<GELU>("tanh");
    case Activation::Tanh: return std::make_shared<Tanh>();
  }
  KILN_FAIL("MLP: unknown activation {}", static_cast<int>(a));
}
}  // namespace

MLP::MLP(const MLPOptions& options) : Sequential("MLP"), options_(options) {
  const auto& s = options.sizes;
  KILN_CHECK(s.size() >= 2, "MLP: sizes needs at least an input and an output size, got {}", shape_str(s));
  for (int64_t n : s) KILN_CHECK(n > 0, "MLP: every size must be positive, got {}", shape_str(s));
  KILN_CHECK(options.dropout >= 0.0 && options.dropout <= 1.0, "MLP: dropout has to be between 0 and 1, but got {}",
             options.dropout);
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    push_back(std::make_shared<Linear>(s[i], s[i + 1], options.bias));
    if (i + 2 == s.size()) break;
    push_back(make_activation(options.activation));
    if (options.dropout > 0.0) push_back(std::make_shared<Dropout>(options.dropout));
  }
}

}  // namespace kiln::nn
