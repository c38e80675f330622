// Block functions for map_blocks (cpu/loops.h) that apply a vector formula of cpu/vec_math.h
// to tensors of element type T: float and double arrays go straight through the formula; the
// 16-bit floats are widened to float a piece at a time, computed, and each result rounded
// once, as the scalar kernels do. Shared by the unary and binary kernels and the fused
// linear+GELU backward, so the same element gets the same bits on every path.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "../../tensor/dtype_dispatch.h"
#include "loops.h"
#include "vec_math.h"

namespace kiln::cpu {

/// y[i] = F(x[i]) for i < n on arrays of T, through vec::apply_unary in T's accumulation type.
template <typename T, typename F>
void vec_unary_block(T* y, const T* x, int64_t n) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<T, A>) {
    vec::apply_unary<A, F>(x, y, n);
  } else {
    std::array<A, kGatherBlock> buf;
    for (int64_t first = 0; first < n; first += kGatherBlock) {
      const int64_t m = std::min(kGatherBlock, n - first);
      for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<A>(x[first + i]);
      vec::apply_unary<A, F>(buf.data(), buf.data(), m);
      for (int64_t i = 0; i < m; ++i) y[first + i] = static_cast<T>(buf[i]);
    }
  }
}

/// y[i] = F(g[i], x[i]) for i < n on arrays of T, through vec::apply_binary in T's
/// accumulation type.
template <typename T, typename F>
void vec_binary_block(T* y, const T* g, const T* x, int64_t n) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<T, A>) {
    vec::apply_binary<A, F>(g, x, y, n);
  } else {
    std::array<A, kGatherBlock> gb, xb;
    for (int64_t first = 0; first < n; first += kGatherBlock) {
      const int64_t m = std::min(kGatherBlock, n - first);
      for (int64_t i = 0; i < m; ++i) {
        gb[i] = static_cast<A>(g[first + i]);
        xb[i] = static_cast<A>(x[first + i]);
      }
      vec::apply_binary<A, F>(gb.data(), xb.data(), gb.data(), m);
      for (int64_t i = 0; i < m; ++i) y[first + i] = static_cast<T>(gb[i]);
    }
  }
}

}  // namespace kiln::cpu
