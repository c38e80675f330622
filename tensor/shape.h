// Shape arithmetic shared by every layer: element counts, contiguous strides, dim wrapping,
// broadcasting, and the stride computation that decides whether a view is possible.
// Pure functions on sizes and strides; nothing here touches memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "tensor_impl.h"

namespace kiln {

/// Product of the sizes (1 for a 0-dim shape).
int64_t shape_numel(const Shape& sizes);

/// Row-major strides for `sizes` (innermost stride 1).
Shape contiguous_strides(const Shape& sizes);

/// True when `strides` describe a dense row-major layout of `sizes` (size-1 dims ignored).
bool strides_are_contiguous(const Shape& sizes, const Shape& strides);

/// "[2, 3]": how shapes (or any list of dims) appear in error messages and printouts.
std::string shape_str(std::span<const int64_t> sizes);
/// shape_str for a Shape (also written as a braced list: shape_str({2, 3})).
inline std::string shape_str(const Shape& sizes) { return shape_str(std::span<const int64_t>(sizes)); }

/// Maps a possibly negative dim into [0, ndim); throws "<op>: dim ... out of range" otherwise.
/// A 0-dim tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

/// The shape two operands broadcast to, or a "<op>: ... cannot be broadcast" error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Strides of `sizes` broadcast to `target` (0 for expanded dims); `target` must be a
/// broadcast of `sizes`.
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);

/// Resolves one -1 in a requested shape against `numel`; throws "<op>: shape ... is invalid".
Shape infer_shape(const Shape& requested, int64_t numel, const char* op);

/// Strides that let a tensor of (sizes, strides) be viewed as `new_sizes` without copying,
/// or nullopt when the layout makes that impossible.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes);

}  // namespace kiln
