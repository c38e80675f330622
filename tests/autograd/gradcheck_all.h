// gradcheck over every differentiable op's sample, shared by the CPU and CUDA suites:
// float64 inputs, the differentiable ones made leaves that require grad (keeping their
// strides, so transposed inputs stay transposed), random ops reseeded before each call so
// every evaluation draws the same mask.
#pragma once

#include "op_samples.h"

namespace kiln::testing {

/// Runs gradcheck on sample `s`; returns false when the op has nothing to differentiate.
inline bool gradcheck_sample(const OpSample& s) {
  if (s.differentiable.empty()) return false;
  std::vector<Tensor> inputs = s.inputs;
  for (size_t i : s.differentiable) inputs[i] = inputs[i].detach().requires_grad_();
  const OpDesc* op = find_op(s.op);
  const bool random_op = op != nullptr && op->has(kOpRandom);
  auto fn = [&](const std::vector<Tensor>& x) {
    if (random_op) manual_seed(11);
    return s.fn(x);
  };
  autograd::gradcheck(fn, inputs);
  return true;
}

}  // namespace kiln::testing
