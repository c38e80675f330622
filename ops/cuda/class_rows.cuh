// Helpers of the CUDA kernels that walk [rows, C] class scores row by row (cross_entropy
// forward and backward, nll_loss backward).
//
// A row goes to a group of lanes sized to C: 4 lanes of a warp for a handful of classes (so
// one warp holds 8 rows and a block of 256 threads 64 rows in flight), a whole warp up to
// kWarpRowMax classes, a whole block beyond. Each lane reads its share with 16-byte vector
// loads after a short scalar head that brings the row to a 16-byte boundary, so rows of any
// length (C = 10, 50257, ...) and any 16-byte phase are read with vectors; the loads are
// issued kLoadsInFlight at a time before any is used.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "block_reduce.cuh"
#include "device_types.cuh"
#include "row_cache.cuh"

namespace kiln::cuda_kernels {

/// Vector loads a lane issues before using them.
inline constexpr int kLoadsInFlight = 4;
/// Threads of a block whose rows go to groups of lanes.
inline constexpr int kLaneRowThreads = 256;
/// Classes up to which a row gets 4 lanes (else a warp, up to kWarpRowMax).
inline constexpr int64_t kFewClasses = 32;

/// How the rows of a [rows, C] walk are split.
struct ClassRowsLaunch {
  int lanes;             // lanes per row: 4, 32, or 0 for a block per row
  int threads;           // per block
  unsigned int blocks;
};

/// The split for `rows` rows of `classes` elements of `elem` bytes, with at most
/// `max_blocks` blocks.
inline ClassRowsLaunch class_rows_launch(int64_t rows, int64_t classes, size_t elem, int64_t max_blocks) {
  ClassRowsLaunch l{};
  if (classes <= kWarpRowMax) {
    l.lanes = classes <= kFewClasses ? 4 : kWarpSize;
    l.threads = kLaneRowThreads;
    const int64_t per_block = l.threads / l.lanes;
    l.blocks = static_cast<unsigned int>(std::clamp<int64_t>((rows + per_block - 1) / per_block, 1, max_blocks));
  } else {
    l.lanes = 0;
    l.threads = row_block_threads(classes, static_cast<int>(16 / elem));
    l.blocks = static_cast<unsigned int>(std::clamp<int64_t>(rows, 1, max_blocks));
  }
  return l;
}

/// Elements before `p` reaches a 16-byte boundary (at most n).
template <typename T>
__device__ __forceinline__ int64_t head_elems(const T* p, int64_t n) {
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) % 16);
  const int64_t head = misalign == 0 ? 0 : (16 - misalign) / static_cast<int64_t>(sizeof(T));
  return head < n ? head : n;
}

/// Calls f(x) (x widened to acc_t<T>) for the elements of row[0, n) that lane `lane` of a
/// `size`-lane group owns, in any order.
template <typename T, typename F>
__device__ __forceinline__ void for_row_elements(const T* __restrict__ row, int64_t n, int lane, int size, F& f) {
  constexpr int V = kRowVec<T>;
  const int64_t head = head_elems(row, n);
  for (int64_t i = lane; i < head; i += size) f(widen(row[i]));
  const int64_t nv = (n - head) / V;
  const RowVec<T>* body = reinterpret_cast<const RowVec<T>*>(row + head);
#pragma unroll 1
  for (int64_t j0 = lane; j0 < nv; j0 += static_cast<int64_t>(kLoadsInFlight) * size) {
    RowVec<T> r[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (j0 + static_cast<int64_t>(u) * size < nv) r[u] = body[j0 + static_cast<int64_t>(u) * size];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (j0 + static_cast<int64_t>(u) * size < nv) {
#pragma unroll
        for (int k = 0; k < V; ++k) f(widen(r[u].v[k]));
      }
  }
  for (int64_t i = head + nv * V + lane; i < n; i += size) f(widen(row[i]));
}

/// out[i] = f(in[i] widened, i) narrowed to T, for the elements of a row [0, n) that lane
/// `lane` of a `size`-lane group owns. With kRead false `in` is not read (f gets 0). `vec`:
/// in and out sit at the same 16-byte phase (else every element is moved alone).
template <bool kRead, typename T, typename F>
__device__ __forceinline__ void map_row_elements(const T* __restrict__ in, T* __restrict__ out, int64_t n, int lane,
                                                 int size, bool vec, const F& f) {
  using A = acc_t<T>;
  constexpr int V = kRowVec<T>;
  const int64_t head = vec ? head_elems(out, n) : n;
  for (int64_t i = lane; i < head; i += size) out[i] = narrow<T>(f(kRead ? widen(in[i]) : A(0), i));
  const int64_t nv = (n - head) / V;
  const RowVec<T>* src = reinterpret_cast<const RowVec<T>*>(in + head);
  RowVec<T>* dst = reinterpret_cast<RowVec<T>*>(out + head);
#pragma unroll 1
  for (int64_t j0 = lane; j0 < nv; j0 += static_cast<int64_t>(kLoadsInFlight) * size) {
    RowVec<T> r[kLoadsInFlight];
    if constexpr (kRead) {
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u)
        if (j0 + static_cast<int64_t>(u) * size < nv) r[u] = src[j0 + static_cast<int64_t>(u) * size];
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t j = j0 + static_cast<int64_t>(u) * size;
      if (j >= nv) continue;
      RowVec<T> o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = narrow<T>(f(kRead ? widen(r[u].v[k]) : A(0), head + j * V + k));
      dst[j] = o;
    }
  }
  for (int64_t i = head + nv * V + lane; i < n; i += size) out[i] = narrow<T>(f(kRead ? widen(in[i]) : A(0), i));
}

/// Combines `v` over each aligned group of G lanes of the calling warp (G a power of two up
/// to 32; every lane of the warp must call); every lane gets its group's result.
template <int G, typename V, typename Combine>
__device__ __forceinline__ V lanes_reduce(V v, Combine combine) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset /= 2) v = combine(v, lane_shuffle_xor(v, offset));
  return v;
}

}  // namespace kiln::cuda_kernels
