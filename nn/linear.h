// nn::Linear: y = x @ weight^T + bias, with PyTorch's default initialisation.
#pragma once

#include "module.h"

namespace kiln::nn {

/// A fully connected layer: weight [out_features, in_features], optional bias [out_features].
class Linear : public Module {
 public:
  /// Creates the layer on the CPU in float32 with kaiming-uniform(a=sqrt(5)) weights and
  /// U(-1/sqrt(in), 1/sqrt(in)) bias, as torch.nn.Linear does; move it with to().
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  /// linear(x, weight, bias): x [..., in_features] -> [..., out_features].
  Tensor forward(const Tensor& x) override;
  /// Re-draws weight and bias from the default initialisation.
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_features;
  int64_t out_features;
  Tensor weight;
  Tensor bias;  ///< undefined when built with bias = false
};

}  // namespace kiln::nn
