// clamp, clamp_min, clamp_max: each element limited to [min, max] by number bounds, with
// PyTorch's rules. Floating inputs keep their dtype; integer inputs promote with the bounds
// (clamp(int_tensor, 0.5) is float32, as result_type(int_tensor, 0.5)); bool is refused. A
// NaN element stays NaN; a NaN bound clamps nothing (PyTorch's scalar clamp on both
// devices); with min > max every element becomes max.
#pragma once

#include <optional>

#include "../tensor/tensor.h"

namespace kiln {

/// min(max(x, min), max) elementwise; at least one bound must be given.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
/// clamp in place; the promoted dtype must be x's (no int tensor clamped to a float bound).
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
/// max(x, min) elementwise (clamp with only a lower bound).
Tensor clamp_min(const Tensor& x, const Scalar& min);
/// min(x, max) elementwise (clamp with only an upper bound).
Tensor clamp_max(const Tensor& x, const Scalar& max);

}  // namespace kiln
