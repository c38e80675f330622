// Joining tensors: cat along an existing dim, stack along a new one. Inputs are promoted
// to a common dtype, as in PyTorch; 1-D empty tensors are skipped by cat (PyTorch's legacy
// rule, which makes "start from an empty tensor and cat in a loop" work).
#pragma once

#include <vector>

#include "../tensor/tensor.h"

namespace kiln {

/// Concatenates along `dim`; all other dims must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Stacks equally shaped tensors along a new dim `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace kiln
