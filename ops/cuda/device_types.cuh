// Element types on the device: Kiln's Half/BFloat16 are bit-identical to CUDA's __half and
// __nv_bfloat16, so kernels reinterpret them and use the hardware conversions (which round
// to nearest even, as the CPU code does: CPU and GPU results agree bit for bit where the
// arithmetic does). Also the element conversion of the copy kernel, with the CPU's rules.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../tensor/half.h"

namespace kiln::cuda_kernels {

/// The device type for a Kiln element type.
template <typename T>
struct DeviceScalar {
  using type = T;
};
template <>
struct DeviceScalar<Half> {
  using type = __half;
};
template <>
struct DeviceScalar<BFloat16> {
  using type = __nv_bfloat16;
};
template <typename T>
using device_t = typename DeviceScalar<T>::type;

/// The type arithmetic runs in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<__half> {
  using type = float;
};
template <>
struct Acc<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename Acc<T>::type;

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// A device value widened to its arithmetic type (also usable on the host, e.g. to prepare
/// a kernel argument).
template <typename T>
__host__ __device__ __forceinline__ acc_t<T> widen(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

/// An arithmetic-type value narrowed to T (round to nearest even for the 16-bit floats).
template <typename T, typename A>
__host__ __device__ __forceinline__ T narrow(A v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(v));
  else return static_cast<T>(v);
}

/// One element converted from From to To with the CPU copy's rules (tensor/convert.h):
/// NaN and out-of-range floats become the integer minimum; non-zero becomes true.
template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else {
    const auto w = widen(v);  // float for 16-bit inputs
    using W = decltype(w);
    if constexpr (std::is_same_v<To, bool>) {
      return w != W(0);
    } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<W>) {
      const double d = static_cast<double>(w);
      constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
      if (!(d >= lo && d < -lo)) return std::numeric_limits<To>::min();
      return static_cast<To>(d);
    } else if constexpr (is_half_v<To>) {
      // Through float, as the CPU does (double -> float -> 16 bits).
      return narrow<To>(static_cast<float>(w));
    } else {
      return static_cast<To>(w);
    }
  }
}

}  // namespace kiln::cuda_kernels
