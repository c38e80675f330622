// masked_fill: a number written wherever a bool mask is true, PyTorch's semantics. The mask
// broadcasts against the tensor: in place it must broadcast to the tensor's shape; the
// out-of-place form broadcasts both (torch.masked_fill does the same). The value is
// converted to the tensor's dtype (2.7 into an int tensor writes 2).
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// A copy of x (broadcast with mask) with `value` wherever mask is true; mask must be bool.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
/// Writes `value` into x wherever mask (broadcast to x's shape) is true.
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);

}  // namespace kiln
