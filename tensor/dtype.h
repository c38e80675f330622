// DType: the run-time element type of a tensor, and PyTorch's type-promotion lattice.
//
// dtype is a run-time property (Note [dtype is a value], in dtype.cpp): kernels branch on it
// once, through the dispatch_* helpers of dtype_dispatch.h, rather than templating the API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "half.h"

namespace kiln {

/// The element types a Tensor can hold. Float32 is the default.
enum class DType : uint8_t { Bool, Int32, Int64, Float16, BFloat16, Float32, Float64 };

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;

/// Number of dtypes, for tables indexed by dtype.
inline constexpr int kNumDTypes = 7;

/// Bytes per element.
constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

/// Significand bits of a floating dtype (11 float16, 8 bfloat16, 24 float32, 53 float64):
/// random uniforms are drawn on this grid so they stay below 1 once stored (tensor/philox.h).
constexpr int significand_digits(DType t) {
  switch (t) {
    case DType::Float16: return 11;
    case DType::BFloat16: return 8;
    case DType::Float32: return 24;
    case DType::Float64: return 53;
    default: return 0;
  }
}

/// PyTorch's short name: "float32", "bfloat16", "int64", "bool", ...
std::string_view dtype_name(DType t);

/// True for float16, bfloat16, float32 and float64.
constexpr bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

/// True for int32 and int64 (bool is its own category, as in PyTorch).
constexpr bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64; }

/// The dtype both operands are converted to when combined: PyTorch's promote_types.
DType promote_types(DType a, DType b);

/// Maps a C++ element type to its DType (float -> Float32, int64_t -> Int64, Half -> Float16, ...).
template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

}  // namespace kiln

template <>
struct fmt::formatter<kiln::DType> : fmt::formatter<std::string_view> {
  auto format(kiln::DType t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::dtype_name(t), ctx);
  }
};
