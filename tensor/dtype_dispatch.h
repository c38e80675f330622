// The one run-time -> compile-time dtype switch. Kernels write their body once as a
// templated lambda and call it through the dispatcher that lists the dtypes they support:
//
//   dispatch_floating(x.dtype(), "softmax", [&]<typename T>() { softmax_rows<T>(...); });
//
// An unsupported dtype becomes "softmax: unsupported dtype int64 (supported: ...)".
#pragma once

#include <cstdint>
#include <initializer_list>

#include "../core/error.h"
#include "dtype.h"
#include "half.h"

namespace kiln {

/// The type arithmetic on T is carried out in: float for the 16-bit floats, T otherwise.
template <typename T>
struct AccType {
  using type = T;
};
template <>
struct AccType<Half> {
  using type = float;
};
template <>
struct AccType<BFloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename AccType<T>::type;

namespace detail {
[[noreturn]] void throw_unsupported_dtype(const char* op, DType got, std::initializer_list<DType> supported);
}  // namespace detail

/// Runs f.template operator()<T>() for the C++ type T of `t`, if T is one of Ts; otherwise
/// throws "<op>: unsupported dtype ...". The body must return void.
template <typename... Ts, typename F>
void dispatch_among(DType t, const char* op, F&& f) {
  const bool done = ((dtype_of<Ts>() == t ? (f.template operator()<Ts>(), true) : false) || ...);
  if (!done) [[unlikely]]
    detail::throw_unsupported_dtype(op, t, {dtype_of<Ts>()...});
}

/// Every dtype.
template <typename F>
void dispatch_all(DType t, const char* op, F&& f) {
  dispatch_among<float, double, Half, BFloat16, int64_t, int32_t, bool>(t, op, std::forward<F>(f));
}

/// Every dtype but bool.
template <typename F>
void dispatch_numeric(DType t, const char* op, F&& f) {
  dispatch_among<float, double, Half, BFloat16, int64_t, int32_t>(t, op, std::forward<F>(f));
}

/// The floating dtypes.
template <typename F>
void dispatch_floating(DType t, const char* op, F&& f) {
  dispatch_among<float, double, Half, BFloat16>(t, op, std::forward<F>(f));
}

}  // namespace kiln
