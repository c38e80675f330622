// gradcheck: compares the gradients autograd computes with float64 central differences
// (torch.autograd.gradcheck). To stay affordable on every op it checks random projections:
// for a random vector v it compares the gradient of sum(v * fn(inputs)) with respect to
// every element of every input that requires grad against (s(x + eps) - s(x - eps)) / 2 eps.
// A wrong formula shows in any projection with probability one.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::autograd {

/// Tolerances and effort of gradcheck.
struct GradcheckOptions {
  double eps = 1e-6;       ///< the central-difference step
  double atol = 1e-5;      ///< absolute tolerance
  double rtol = 1e-3;      ///< relative tolerance (of the numerical value)
  int projections = 2;     ///< random vectors v tried
  uint64_t seed = 1234;    ///< for v
};

/// Checks fn's gradients for every input that requires grad (float64 inputs and output);
/// throws kiln::Error naming the input, the element and both values at the first mismatch.
void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               const GradcheckOptions& options = {});

}  // namespace kiln::autograd
