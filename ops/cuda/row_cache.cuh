// Helpers of the row-wise CUDA kernels (softmax, layer_norm, nll_loss). Those kernels give
// each row to a group of threads (one warp for short rows, several rows per block; the
// whole block for long rows), read the row from global memory once into the group's slice
// of dynamic shared memory (16-byte vector loads when every row is aligned), and run their
// statistics passes and the write pass over that cache, so global memory sees one read and
// one write per element. Rows too long for shared memory are visited in global memory with
// the same visitor.
// Group-wide combines (group_reduce) come from block_reduce.cuh.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../../core/cuda_check.h"
#include "block_reduce.cuh"
#include "elementwise.cuh"

namespace kiln::cuda_kernels {

/// Elements of T in one 16-byte vector (8 halves, 4 floats, 2 doubles).
template <typename T>
inline constexpr int kRowVec = static_cast<int>(16 / sizeof(T));
template <typename T>
using RowVec = Vec<T, kRowVec<T>>;

/// visit_row's vector loads in flight per thread when reading a shared-memory cache.
inline constexpr int kFromCache = 1;
/// Threads per block in warp-per-row mode (that many rows per block / 32).
inline constexpr int kWarpRowThreads = 128;
/// Resident blocks per SM the warp-per-row kernels are compiled for (at most 80 registers a
/// thread: 24 warps per SM).
inline constexpr int kWarpRowMinBlocks = 6;
/// Longest row (elements) handled by one warp; longer rows get a block each.
inline constexpr int64_t kWarpRowMax = 1024;
/// Most threads of a block-per-row kernel (its __launch_bounds__).
inline constexpr int kRowBlockMax = 1024;

/// Orders shared-memory accesses within the calling group.
template <bool kWarp>
__device__ __forceinline__ void group_sync() {
  if constexpr (kWarp) __syncwarp();
  else __syncthreads();
}

/// The calling thread's place in its row group: rank `tid` of `size` threads, the group's
/// first row, the row step of the grid-stride loop over rows, and its cache slice index.
struct RowGroup {
  int tid, size, slot;
  int64_t first_row, row_step;
};

template <bool kWarp>
__device__ __forceinline__ RowGroup row_group() {
  if constexpr (kWarp) {
    const int per_block = static_cast<int>(blockDim.x) / kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
    return {static_cast<int>(threadIdx.x) % kWarpSize, kWarpSize, warp,
            static_cast<int64_t>(blockIdx.x) * per_block + warp, static_cast<int64_t>(gridDim.x) * per_block};
  } else {
    return {static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), 0, static_cast<int64_t>(blockIdx.x),
            static_cast<int64_t>(gridDim.x)};
  }
}

/// Visits elements [0, n) of a row (element i at src[i * step]) split over a group of
/// `size` threads: f(const RowVec<T>& v, int64_t first, int count) gets elements
/// [first, first + count). With `vec` (step 1, src 16-byte aligned) full vectors come from
/// 16-byte loads and count is the constant kRowVec<T> there, so the inlined f needs no
/// bounds checks; the tail and every element of a strided row come one at a time (count 1).
/// U vector loads are in flight per thread: 4 for global memory, 1 for a shared-memory
/// cache (its latency needs no more, and fewer registers keep occupancy up).
template <int U = 4, typename T, typename F>
__device__ __forceinline__ void visit_row(const T* __restrict__ src, int64_t n, int64_t step, bool vec, int tid,
                                          int size, F& f) {
  constexpr int V = kRowVec<T>;
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / V;
    const RowVec<T>* s = reinterpret_cast<const RowVec<T>*>(src);
#pragma unroll 1  // U is the unrolling: more would only add registers
    for (int64_t j0 = tid; j0 < nv; j0 += static_cast<int64_t>(U) * size) {
      RowVec<T> r[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j0 + static_cast<int64_t>(u) * size < nv) r[u] = s[j0 + static_cast<int64_t>(u) * size];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j0 + static_cast<int64_t>(u) * size < nv) f(r[u], (j0 + static_cast<int64_t>(u) * size) * V, V);
    }
    done = nv * V;
  }
#pragma unroll 4
  for (int64_t i = done + tid; i < n; i += size) {
    RowVec<T> r;
    r.v[0] = src[i * step];
    f(r, i, 1);
  }
}

/// Stores what visit_row visits into a row cache (16-byte aligned shared memory with room
/// for n rounded up to whole vectors), then hands it on to `inner` (a statistic).
template <typename T, typename Inner>
struct CacheStore {
  T* cache;
  Inner& inner;
  __device__ __forceinline__ void operator()(const RowVec<T>& v, int64_t first, int count) {
    if (count == kRowVec<T>) {
      reinterpret_cast<RowVec<T>*>(cache)[first / kRowVec<T>] = v;
    } else {
      for (int k = 0; k < count; ++k) cache[first + k] = v.v[k];
    }
    inner(v, first, count);
  }
};

/// Elements per cache slice: n rounded up to whole vectors, so every slice stays aligned.
template <typename T>
inline int64_t cache_elems(int64_t n) {
  return (n + kRowVec<T> - 1) / kRowVec<T> * kRowVec<T>;
}

/// Threads of a block that owns one row of n elements: about four 16-byte vectors per
/// thread, a power of two in [128, kRowBlockMax].
inline int row_block_threads(int64_t n, int vec) {
  const int64_t want = (n + 4 * vec - 1) / (4 * vec);
  int threads = 128;
  while (threads < kRowBlockMax && threads < want) threads *= 2;
  return threads;
}

/// Blocks for a grid-stride loop over `groups` row groups of `per_block` groups per block.
inline unsigned int row_blocks(int64_t groups, int per_block) {
  const int64_t blocks = (groups + per_block - 1) / per_block;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
}

/// Bytes of dynamic shared memory a row cache may use on `device` (the opt-in maximum per
/// block, less room for the kernels' static reduction scratch).
inline size_t row_cache_budget(int device) {
  static std::array<std::atomic<int>, 64> optin{};
  const size_t slot = static_cast<size_t>(device) % optin.size();
  int bytes = optin[slot].load(std::memory_order_relaxed);
  if (bytes == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    optin[slot].store(bytes, std::memory_order_relaxed);
  }
  return bytes > 2048 ? static_cast<size_t>(bytes) - 2048 : 0;
}

/// Lets `kernel` launch on the current device (`device`) with `bytes` of dynamic shared
/// memory: above the default 48 KiB each kernel needs an opt-in, made once per size.
inline void allow_dynamic_smem(const void* kernel, int device, size_t bytes) {
  if (bytes <= 48 * 1024) return;
  static std::mutex mutex;
  static std::vector<std::tuple<const void*, int, size_t>> allowed;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [k, d, b] : allowed) {
    if (k != kernel || d != device) continue;
    if (b >= bytes) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    b = bytes;
    return;
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  allowed.emplace_back(kernel, device, bytes);
}

/// Arithmetic on the accumulation type: float or double overloads chosen explicitly.
template <typename A>
__device__ __forceinline__ A acc_exp(A x) {
  if constexpr (std::is_same_v<A, double>) return ::exp(x);
  else return ::expf(x);
}
template <typename A>
__device__ __forceinline__ A acc_log(A x) {
  if constexpr (std::is_same_v<A, double>) return ::log(x);
  else return ::logf(x);
}
template <typename A>
__device__ __forceinline__ A acc_sqrt(A x) {
  if constexpr (std::is_same_v<A, double>) return ::sqrt(x);
  else return ::sqrtf(x);
}

/// Sum of two values (the combine of group_reduce).
struct SumOp {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a + b;
  }
};

/// A visitor that folds a row's visited elements into `acc` with acc = step(acc, x), x
/// widened to acc_t<T>: the statistics passes of the row kernels (a sum, a max, a sum of
/// squared deviations or of shifted exponentials).
template <typename T, typename Step>
struct RowFold {
  acc_t<T> acc;
  Step step;
  __device__ __forceinline__ void operator()(const RowVec<T>& v, int64_t, int count) {
#pragma unroll
    for (int k = 0; k < kRowVec<T>; ++k)
      if (k < count) acc = step(acc, widen(v.v[k]));
  }
};

}  // namespace kiln::cuda_kernels
