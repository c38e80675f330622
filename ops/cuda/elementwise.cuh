// The CUDA elementwise engine, the twin of ops/cpu/loops.h: out[i] = f(in_0[i], ...) over
// operands of the output's shape. One generic path with two kernels:
//   - vectorised: every operand contiguous and aligned, so each thread moves 16 bytes of
//     the widest operand per load/store (4 floats, 8 halves), the way memory-bound kernels
//     reach full bandwidth;
//   - strided: anything else (transposed, sliced, expanded with stride 0), with dims
//     collapsed first (ops/collapse.h) so the index arithmetic is as short as the layout
//     allows.
// Kernels launch on the current stream of the output's device. Functors are __device__
// lambdas over device types (__half, __nv_bfloat16, float, ...).
#pragma once

#include <cuda_runtime.h>

#include <cuda/std/tuple>
#include <cuda/std/utility>

#include <algorithm>
#include <array>
#include <cstdint>

#include "../../core/cuda_guard.h"
#include "../../core/stream.h"
#include "../../tensor/tensor.h"
#include "../collapse.h"
#include "device_types.cuh"

namespace kiln::cuda_kernels {

/// Most dims the strided kernel indexes after collapsing (more: an error naming the op).
inline constexpr int kMaxDims = 12;
inline constexpr int kThreads = 256;

/// Maps a linear index over the output shape to each operand's element offset.
template <int N>
struct Indexer {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][N] = {};

  __device__ __forceinline__ void offsets(int64_t linear, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * strides[d][k];
    }
  }
};

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <int VEC, typename F, typename Out, typename... In>
__global__ void vectorized_kernel(int64_t n, F f, Out* out, const In*... ins) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * VEC;
  for (int64_t base = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC; base < n; base += stride) {
    if (base + VEC <= n) {
      // One aligned vector load per input, then VEC independent applications.
      const ::cuda::std::tuple<Vec<In, VEC>...> loaded(*reinterpret_cast<const Vec<In, VEC>*>(ins + base)...);
      Vec<Out, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = ::cuda::std::apply([&](const auto&... vs) { return f(vs.v[j]...); }, loaded);
      *reinterpret_cast<Vec<Out, VEC>*>(out + base) = o;
    } else {
      for (int64_t i = base; i < n; ++i) out[i] = f(ins[i]...);
    }
  }
}

template <int N, typename F, typename Out, typename... In, size_t... I>
__device__ __forceinline__ void apply_at(const int64_t (&off)[N], F& f, Out* out, ::cuda::std::index_sequence<I...>,
                                         const In*... ins) {
  out[off[0]] = f(ins[off[I + 1]]...);
}

template <int N, typename F, typename Out, typename... In>
__global__ void strided_kernel(int64_t n, Indexer<N> idx, F f, Out* out, const In*... ins) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[N];
    idx.offsets(i, off);
    apply_at<N>(off, f, out, ::cuda::std::index_sequence_for<In...>{}, ins...);
  }
}

/// Blocks for `work_items` threads' worth of work, capped so huge tensors use a grid-stride
/// loop instead of an enormous grid.
inline unsigned int blocks_for(int64_t work_items) {
  const int64_t blocks = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}

inline cudaStream_t stream_of(const Tensor& t) {
  return reinterpret_cast<cudaStream_t>(cuda::current_stream(t.device()).id());
}

template <typename T>
bool aligned_for(const void* p, int vec) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * static_cast<size_t>(vec)) == 0;
}

/// Elementwise map on the device with explicit Kiln element types:
/// map<float, float, float>(out, f, a, b) runs out[i] = f(a[i], b[i]) with f a __device__
/// functor over device types. Every input must already have out's shape (expand first)
/// and live on out's device.
template <typename OutK, typename... InK, typename F, typename... Ts>
void map(const char* op, const Tensor& out, F f, const Ts&... ins) {
  static_assert(sizeof...(InK) == sizeof...(Ts), "one element type per input tensor");
  using Out = device_t<OutK>;
  constexpr size_t N = 1 + sizeof...(InK);
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(out.device().index());
  const cudaStream_t stream = stream_of(out);

  // Vectorised when every operand is contiguous and 16-byte friendly.
  constexpr size_t widest = std::max({sizeof(Out), sizeof(device_t<InK>)...});
  constexpr int kVec = static_cast<int>(16 / widest) > 0 ? static_cast<int>(16 / widest) : 1;
  const bool contiguous = out.is_contiguous() && (ins.is_contiguous() && ...);
  const bool aligned = aligned_for<Out>(out.data_ptr(), kVec) && (aligned_for<device_t<InK>>(ins.data_ptr(), kVec) && ...);
  if (contiguous && aligned && kVec > 1) {
    vectorized_kernel<kVec><<<blocks_for((n + kVec - 1) / kVec), kThreads, 0, stream>>>(
        n, f, static_cast<Out*>(out.data_ptr()), static_cast<const device_t<InK>*>(ins.data_ptr())...);
  } else {
    std::array<DimValues, N> strides;
    strides[0] = DimValues();
    for (int64_t s : out.strides()) strides[0].push_back(s);
    {
      [[maybe_unused]] size_t k = 1;  // unused when there are no inputs (fill)
      ((void)[&] {
        for (int64_t s : ins.strides()) strides[k].push_back(s);
        ++k;
      }(), ...);
    }
    std::array<const DimValues*, N> ptrs;
    for (size_t k = 0; k < N; ++k) ptrs[k] = &strides[k];
    const CollapsedDims<N> dims = collapse_dims<N>(out.sizes(), ptrs);
    KILN_CHECK(static_cast<int>(dims.sizes.size()) <= kMaxDims,
               "{}: the operands' layout needs {} dims after collapsing; the CUDA kernels index at most {} (call "
               "contiguous() on the inputs)",
               op, dims.sizes.size(), kMaxDims);
    Indexer<static_cast<int>(N)> idx;
    idx.ndim = static_cast<int>(dims.sizes.size());
    for (int d = 0; d < idx.ndim; ++d) {
      idx.sizes[d] = dims.sizes[static_cast<size_t>(d)];
      for (size_t k = 0; k < N; ++k) idx.strides[d][k] = dims.strides[static_cast<size_t>(d)][k];
    }
    strided_kernel<static_cast<int>(N)><<<blocks_for(n), kThreads, 0, stream>>>(
        n, idx, f, static_cast<Out*>(out.data_ptr()), static_cast<const device_t<InK>*>(ins.data_ptr())...);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace kiln::cuda_kernels
