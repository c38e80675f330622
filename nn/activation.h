// Activation and regularisation layers: GELU, ReLU, Tanh, Dropout.
#pragma once

#include <string>

#include "module.h"

namespace kiln::nn {

/// GELU with the exact erf ("none") or the tanh approximation ("tanh").
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

/// max(x, 0).
class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

/// tanh(x).
class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

/// Inverted dropout with probability p while training; the identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
};

}  // namespace kiln::nn
