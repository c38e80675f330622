// Integer power by repeated squaring, shared by the CPU and CUDA pow kernels so both give
// the same (exact, wrapping) results, including PyTorch's rule for negative exponents: only
// bases 1 and -1 survive, everything else truncates to 0.
#pragma once

#include "../core/host_device.h"
#include "wrapping.h"

namespace kiln {

/// base ** exp for integers, wrapping modulo 2^bits as PyTorch's results do. The base is
/// squared only while bits of the exponent remain, so results that fit (3 ** 39, 2 ** 62
/// in int64) never pass through an overflowing square.
template <typename T>
KILN_HOST_DEVICE inline T int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;  // not -exp: -INT64_MIN overflows
    return 0;
  }
  T result = 1;
  while (exp > 0) {
    if (exp & 1) result = wrapping_mul(result, base);
    exp >>= 1;
    if (exp > 0) base = wrapping_mul(base, base);
  }
  return result;
}

}  // namespace kiln
