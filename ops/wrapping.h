// Two's complement ("wrapping") arithmetic for the integer kernels, shared by the CPU and
// CUDA code so both give the same bits. Signed overflow is undefined behaviour in C++ and
// CUDA C++ (INT64_MAX + 1 may be assumed never to happen, and code around it miscompiled),
// while PyTorch's integer ops wrap. So signed integers are computed in the unsigned type of
// the same width, where arithmetic is defined modulo 2^n, and converted back (a conversion
// C++20 defines as modular). Every other type (floats, bool) takes the plain expression,
// chosen at compile time, so float kernels compile to exactly what they were.
#pragma once

#include <type_traits>

#include "../core/host_device.h"

namespace kiln {

/// True for the types whose arithmetic wraps here: the signed integers (bool is not one).
template <typename T>
inline constexpr bool kWrapsSigned = std::is_integral_v<T> && std::is_signed_v<T> && !std::is_same_v<T, bool>;

namespace detail {
// The unsigned type the arithmetic runs in: T's width, but at least unsigned int, since
// narrower unsigned types promote to int, whose products can overflow again.
template <typename T>
using wrap_unsigned_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
}  // namespace detail

/// a + b, wrapping for signed integers.
template <typename T>
KILN_HOST_DEVICE constexpr T wrapping_add(T a, T b) {
  if constexpr (kWrapsSigned<T>) {
    using U = detail::wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<T>(a + b);
  }
}

/// a - b, wrapping for signed integers.
template <typename T>
KILN_HOST_DEVICE constexpr T wrapping_sub(T a, T b) {
  if constexpr (kWrapsSigned<T>) {
    using U = detail::wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return static_cast<T>(a - b);
  }
}

/// a * b, wrapping for signed integers.
template <typename T>
KILN_HOST_DEVICE constexpr T wrapping_mul(T a, T b) {
  if constexpr (kWrapsSigned<T>) {
    using U = detail::wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<T>(a * b);
  }
}

/// -a, wrapping for signed integers (-INT64_MIN is INT64_MIN, as in PyTorch).
template <typename T>
KILN_HOST_DEVICE constexpr T wrapping_neg(T a) {
  if constexpr (kWrapsSigned<T>) {
    using U = detail::wrap_unsigned_t<T>;
    return static_cast<T>(U(0) - static_cast<U>(a));
  } else {
    return static_cast<T>(-a);
  }
}

}  // namespace kiln
