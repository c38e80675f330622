// Warp- and block-level reductions for the CUDA row and reduction kernels (reductions,
// softmax, layer_norm, nll_loss). A reduction is any associative, commutative
// `combine(a, b)` over a value type: an arithmetic type, or a struct (a (value, index) pair,
// a (max, sum) pair, ...) with a static `shfl_xor(v, offset)` that shuffles it member by
// member. Lanes combine through shuffles, warps through one shared-memory slot each; lanes
// past the last warp take the identity, so sums are as safe as max and min.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

namespace kiln::cuda_kernels {

inline constexpr int kWarpSize = 32;

/// `v` from lane (lane ^ offset) of the calling warp (every lane must call): arithmetic
/// types directly (bool through int), structs through their static shfl_xor(v, offset).
template <typename V>
__device__ __forceinline__ V lane_shuffle_xor(V v, int offset) {
  if constexpr (std::is_same_v<V, bool>) return __shfl_xor_sync(0xffffffffu, static_cast<int>(v), offset) != 0;
  else if constexpr (std::is_arithmetic_v<V>) return __shfl_xor_sync(0xffffffffu, v, offset);
  else return V::shfl_xor(v, offset);
}

/// Combines `v` across the 32 lanes of the calling warp; every lane gets the result.
template <typename V, typename Combine>
__device__ __forceinline__ V warp_reduce(V v, Combine combine) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = combine(v, lane_shuffle_xor(v, offset));
  return v;
}

/// Combines `v` over the calling group (kWarp: the warp; else the whole block, blockDim.x a
/// multiple of 32, every thread calling); every member gets the result. `identity` fills the
/// lanes past the last warp; `scratch` (32 values of shared memory, unused for a warp) may be
/// reused once this returns.
template <bool kWarp, typename V, typename Combine>
__device__ __forceinline__ V group_reduce(V v, Combine combine, V identity, V* scratch) {
  v = warp_reduce(v, combine);
  if constexpr (kWarp) {
    return v;
  } else {
    const int warps = static_cast<int>(blockDim.x) / kWarpSize;
    if (warps == 1) return v;
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_reduce(lane < warps ? scratch[lane] : identity, combine);
  }
}

}  // namespace kiln::cuda_kernels
