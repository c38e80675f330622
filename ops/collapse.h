// Dim collapsing, shared by the CPU loops and the CUDA elementwise kernels: size-1 dims are
// dropped and neighbouring dims merged wherever every operand steps through them as one
// longer dim. A contiguous tensor becomes a single dim; a transposed or expanded one keeps
// only the dims its layout really needs, so index arithmetic runs over as few dims as
// possible.
#pragma once

#include <array>
#include <cstdint>

#include "../core/small_vector.h"

namespace kiln {

/// Dims handled without touching the heap.
inline constexpr size_t kInlineDims = 8;
/// Per-dim values (sizes or strides).
using DimValues = SmallVector<int64_t, kInlineDims>;

/// A shape and N operands' strides after collapsing.
template <size_t N>
struct CollapsedDims {
  bool empty = false;  ///< some size is 0: nothing to visit
  DimValues sizes;     ///< outermost first; empty for a single element
  SmallVector<std::array<int64_t, N>, kInlineDims> strides;  ///< per dim, per operand
};

/// Collapses `sizes` with each operand's strides (in any unit, as long as it is the same
/// for all dims of one operand).
template <size_t N, typename Sizes>
CollapsedDims<N> collapse_dims(const Sizes& sizes, const std::array<const DimValues*, N>& strides) {
  CollapsedDims<N> out;
  for (int64_t s : sizes)
    if (s == 0) out.empty = true;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t size = sizes[d];
    if (size == 1) continue;
    std::array<int64_t, N> st;
    for (size_t k = 0; k < N; ++k) st[k] = (*strides[k])[d];
    if (!out.sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        if (out.strides.back()[k] != st[k] * size) mergeable = false;
      if (mergeable) {
        out.sizes.back() *= size;
        out.strides.back() = st;
        continue;
      }
    }
    out.sizes.push_back(size);
    out.strides.push_back(st);
  }
  return out;
}

}  // namespace kiln
