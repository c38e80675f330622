// Layer normalisation over the trailing dims named by normalized_shape, with optional
// elementwise affine weight and bias (floating dtypes).
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// (x - mean) / sqrt(var + eps) * weight + bias over the last normalized_shape.size() dims
/// (biased variance, as in PyTorch); weight and bias have shape normalized_shape or are
/// undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace kiln
