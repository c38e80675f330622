// clamp's per-element formula, written once for the CPU loop (clamp_cpu.cpp) and the CUDA
// kernel (clamp_cuda.cu): two selects, v < lo ? lo : v then hi < r ? hi : r, so a NaN element
// fails both tests and passes through, and a NaN bound (every comparison false) clamps
// nothing: PyTorch's scalar clamp. make_clamp (host) rounds each bound to the element type
// before widening it, so 16-bit floats compare in float against the bound their dtype can
// hold and the result is always the element or that rounded bound, on either device.
#pragma once

#include <optional>

#include "../core/host_device.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/scalar.h"

namespace kiln::math {

/// Clamps a value of accumulation type A to [lo, hi]; an absent bound is skipped.
template <typename A>
struct Clamp {
  A lo{}, hi{};
  bool has_lo = false, has_hi = false;
  /// The clamped value.
  KILN_HOST_DEVICE A operator()(A v) const {
    if (has_lo) v = v < lo ? lo : v;
    if (has_hi) v = hi < v ? hi : v;
    return v;
  }
};

/// The clamp formula for elements of type T (Kiln's element type): each bound rounded to T,
/// then widened to T's accumulation type.
template <typename T>
Clamp<acc_t<T>> make_clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  Clamp<acc_t<T>> c;
  c.has_lo = min.has_value();
  c.has_hi = max.has_value();
  if (c.has_lo) c.lo = static_cast<acc_t<T>>(min->to<T>());
  if (c.has_hi) c.hi = static_cast<acc_t<T>>(max->to<T>());
  return c;
}

}  // namespace kiln::math
