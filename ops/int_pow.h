// Integer power by repeated squaring, shared by the CPU and CUDA pow kernels so both give
// the same (exact, wrapping) results, including PyTorch's rule for negative exponents: only
// bases 1 and -1 survive, everything else truncates to 0.
#pragma once

#include "../core/host_device.h"

namespace kiln {

/// base ** exp for integers.
template <typename T>
KILN_HOST_DEVICE inline T int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  T result = 1;
  while (exp > 0) {
    if (exp & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exp >>= 1;
  }
  return result;
}

}  // namespace kiln
