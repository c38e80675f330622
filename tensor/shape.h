// Shape arithmetic shared by every layer: element counts, contiguous strides, dim wrapping,
// broadcasting, and the stride computation that decides whether a view is possible.
// Pure functions on sizes and strides; nothing here touches memory.
//
// Every product of sizes, strides and element sizes goes through mul_overflows() (and sums
// through add_overflows()), here or in the checked helpers built on them: a shape such as
// {1 << 62} of float32 would otherwise wrap its byte count to 0 and hand kernels a null
// pointer. An overflow is a kiln::Error that names the op and the shape.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "tensor_impl.h"

namespace kiln {

/// Sets *out = a * b; true when the product overflows int64 (*out is then meaningless).
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }
/// Sets *out = a + b; true when the sum overflows int64.
inline bool add_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }

/// a * b, or "<op>: size arithmetic for shape <shape> overflows int64 (a * b)".
int64_t checked_mul(int64_t a, int64_t b, const char* op, std::span<const int64_t> shape);
/// a + b, or "<op>: size arithmetic for shape <shape> overflows int64 (a + b)".
int64_t checked_add(int64_t a, int64_t b, const char* op, std::span<const int64_t> shape);

/// Product of the sizes (1 for a 0-dim shape, 0 when any size is 0), or nullopt when it
/// overflows int64. Sizes must be non-negative.
std::optional<int64_t> checked_numel(std::span<const int64_t> sizes);

/// Product of the sizes (1 for a 0-dim shape, 0 when any size is 0); throws "<op>: shape
/// ... has too many elements" when it overflows int64. Sizes must be non-negative.
int64_t shape_numel(const Shape& sizes, const char* op = "numel");

/// numel elements of `element_size` bytes in bytes; throws "<op>: shape ... is too large"
/// when that overflows int64.
int64_t checked_nbytes(const Shape& sizes, int64_t numel, size_t element_size, const char* op);

/// Row-major strides for `sizes` (innermost stride 1, size-0 dims counted as 1); throws
/// "<op>: ... strides ... overflow" when one does not fit int64 (possible for empty shapes).
Shape contiguous_strides(const Shape& sizes, const char* op = "contiguous_strides");

/// Storage elements a layout needs: 1 + the largest element index it reaches (offset plus
/// (size - 1) * stride per dim), or 0 when it has no elements. Sizes, strides and offset
/// must be non-negative; throws "<op>: ... overflows" when the index does not fit int64.
int64_t storage_extent(const Shape& sizes, const Shape& strides, int64_t offset, const char* op);

/// Throws "<op>: stride ... overflows int64 in bytes" unless every stride times
/// `element_size` fits int64: kernels walk tensors in byte strides.
void check_byte_strides(const Shape& sizes, const Shape& strides, size_t element_size, const char* op);

/// True when `strides` describe a dense row-major layout of `sizes` (size-1 dims ignored).
bool strides_are_contiguous(const Shape& sizes, const Shape& strides);

/// "[2, 3]": how shapes (or any list of dims) appear in error messages and printouts.
std::string shape_str(std::span<const int64_t> sizes);
/// shape_str for a Shape (also written as a braced list: shape_str({2, 3})).
inline std::string shape_str(const Shape& sizes) { return shape_str(std::span<const int64_t>(sizes)); }

/// Maps a possibly negative dim into [0, ndim); throws "<op>: dim ... out of range" otherwise.
/// A 0-dim tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

/// The shape a and b broadcast to (sizes equal or 1, aligned from the right), or nullopt
/// when they do not; the result's element count is not checked.
std::optional<Shape> try_broadcast_shapes(const Shape& a, const Shape& b);

/// The shape two operands broadcast to, or a "<op>: ... cannot be broadcast" error (also
/// when the result has too many elements for int64).
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Strides of `sizes` broadcast to `target` (0 for expanded dims); `target` must be a
/// broadcast of `sizes`.
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);

/// Resolves one -1 in a requested shape against `numel`; throws "<op>: shape ... is invalid"
/// (also when the requested sizes' product overflows).
Shape infer_shape(const Shape& requested, int64_t numel, const char* op);

/// Strides that let a tensor of (sizes, strides) be viewed as `new_sizes` without copying,
/// or nullopt when the layout makes that impossible; `op` names the caller in errors.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes,
                                  const char* op = "view");

}  // namespace kiln
