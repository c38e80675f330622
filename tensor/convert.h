// Element conversion between dtypes with defined results everywhere: C++ leaves a float
// to integer cast undefined for NaN and out-of-range values, so those map to the integer
// minimum, the value x86 hardware (and therefore PyTorch on the CPU) produces.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "half.h"

namespace kiln {

/// Converts one element from From to To as a Kiln copy does.
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>) {
      return static_cast<To>(v);
    } else {
      const double d = static_cast<double>(static_cast<std::conditional_t<std::is_same_v<From, double>, double, float>>(v));
      constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
      constexpr double hi = -lo;  // 2^31 or 2^63: one past the largest value
      if (!(d >= lo && d < hi)) return std::numeric_limits<To>::min();
      return static_cast<To>(d);
    }
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    if constexpr (std::is_same_v<From, double>) return To(static_cast<float>(v));
    else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) return To(static_cast<float>(v));
    else return To(static_cast<float>(v));
  } else {  // To is float or double
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) return static_cast<To>(static_cast<float>(v));
    else return static_cast<To>(v);
  }
}

}  // namespace kiln
