// Factories: tensors made from a shape (empty, zeros, ones, full, eye, arange), from random
// numbers (rand, randn: counter-based, reproducible after manual_seed), and from user
// memory (from_vector copies, from_blob wraps without copying).
#pragma once

#include <functional>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "../tensor/generator.h"
#include "../tensor/tensor.h"

namespace kiln {

/// A tensor with uninitialised values.
Tensor empty(const Shape& sizes, TensorOptions options = {});
/// A tensor of zeros.
Tensor zeros(const Shape& sizes, TensorOptions options = {});
/// A tensor of ones.
Tensor ones(const Shape& sizes, TensorOptions options = {});
/// A tensor filled with `value`; without a dtype in options it is inferred from the value
/// (bool, int64 or float32), as torch.full does.
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options = {});
/// The n x n identity.
Tensor eye(int64_t n, TensorOptions options = {});
/// The n x m matrix with ones on the diagonal.
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});
/// [0, 1, ..., end-1]; int64 for an integer end, float32 otherwise.
Tensor arange(const Scalar& end);
/// [start, start+step, ...) up to end; int64 when all three are integers, float32 otherwise.
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1);
/// arange with explicit options (without a dtype in them, inferred as above).
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options);
/// Uniform random values in [0, 1) (floating dtypes).
Tensor rand(const Shape& sizes, TensorOptions options = {});
/// Standard normal random values (floating dtypes).
Tensor randn(const Shape& sizes, TensorOptions options = {});

/// empty() with t's shape, dtype and device.
Tensor empty_like(const Tensor& t);
/// zeros() with t's shape, dtype and device.
Tensor zeros_like(const Tensor& t);
/// ones() with t's shape, dtype and device.
Tensor ones_like(const Tensor& t);
/// full() with t's shape, dtype and device.
Tensor full_like(const Tensor& t, const Scalar& value);
/// rand() with t's shape, dtype and device.
Tensor rand_like(const Tensor& t);
/// randn() with t's shape, dtype and device.
Tensor randn_like(const Tensor& t);

/// Copies `count` elements of type `src_dtype` at `data` into a new tensor of `sizes`
/// converted to options.dtype(); throws when count does not match the shape.
Tensor from_buffer(const void* data, DType src_dtype, int64_t count, const Shape& sizes, TensorOptions options);

/// A copy of `data` with the given shape, converted to options.dtype().
template <typename T>
Tensor from_vector(const std::vector<T>& data, const Shape& sizes, TensorOptions options) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());  // vector<bool> packs bits
    return from_buffer(bytes.data(), DType::Bool, static_cast<int64_t>(bytes.size()), sizes, options);
  } else {
    return from_buffer(data.data(), dtype_of<T>(), static_cast<int64_t>(data.size()), sizes, options);
  }
}
/// A tensor of `sizes` holding a copy of `data` (dtype from T: float -> float32, ...).
template <typename T>
Tensor from_vector(const std::vector<T>& data, const Shape& sizes) {
  return from_vector(data, sizes, TensorOptions(dtype_of<T>()));
}
/// A tensor of `sizes` from a braced list: from_vector({1.f, 2.f, 3.f, 4.f}, {2, 2}).
template <typename T>
Tensor from_vector(std::initializer_list<T> data, const Shape& sizes) {
  return from_vector(std::vector<T>(data), sizes);
}
/// A braced list converted to options.dtype(): from_vector({1.f, 2.f}, {2}, kFloat16).
template <typename T>
Tensor from_vector(std::initializer_list<T> data, const Shape& sizes, TensorOptions options) {
  return from_vector(std::vector<T>(data), sizes, options);
}
/// A 1-D tensor holding a copy of `data`.
template <typename T>
Tensor from_vector(const std::vector<T>& data) {
  return from_vector(data, Shape{static_cast<int64_t>(data.size())});
}

/// Wraps memory the caller owns as a contiguous tensor, without copying. `deleter` (may be
/// empty) runs when the last view of it dies; without one, the memory must outlive them.
Tensor from_blob(void* data, const Shape& sizes, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});
/// from_blob with explicit strides (in elements).
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});

}  // namespace kiln
