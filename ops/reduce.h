// Reductions over one or more dims, with keepdim: sum, mean, max, min (values, like
// PyTorch's amax/amin, which also take several dims), argmax, argmin. An empty dim list
// reduces every dim. Integer and bool sums give int64; mean needs a floating input.
#pragma once

#include "../tensor/tensor.h"

namespace kiln {

/// Sum of all elements (0-dim).
Tensor sum(const Tensor& x);
/// Sum over `dims`.
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Mean of all elements (0-dim; NaN for an empty tensor).
Tensor mean(const Tensor& x);
/// Mean over `dims`.
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Largest element (0-dim); NaN if any element is NaN.
Tensor max(const Tensor& x);
/// Largest values over `dims` (PyTorch's amax).
Tensor max(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Smallest element (0-dim); NaN if any element is NaN.
Tensor min(const Tensor& x);
/// Smallest values over `dims` (PyTorch's amin).
Tensor min(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Same as max(x, dims, keepdim).
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Same as min(x, dims, keepdim).
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Index of the largest element of the flattened tensor (int64, 0-dim); first on ties.
Tensor argmax(const Tensor& x);
/// Indices of the largest values along `dim` (int64); first on ties, NaN counts as largest.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the smallest element of the flattened tensor (int64, 0-dim).
Tensor argmin(const Tensor& x);
/// Indices of the smallest values along `dim` (int64).
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace kiln
