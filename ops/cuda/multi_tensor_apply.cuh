// Multi-tensor apply: one kernel launch updates many tensors (PyTorch's multi_tensor_apply
// idea, written for Kiln). Each launch carries, in its kernel arguments, up to
// kMultiMaxTensors tensors' pointers (one list per operand: param, grad, state...), their
// element counts, two per-tensor scalars (Adam's step size and bias correction; SGD's
// first-step flag), and the index of each tensor's first block. Every block updates one
// chunk of kMultiChunk elements of one tensor: it finds its tensor by a binary search over
// the first-block indices (uniform across the block, in the kernel-argument bank), then
// walks the chunk with 16-byte-class vector loads (4 elements per thread per step) when
// all of that tensor's operands are aligned, scalar loads otherwise. No device buffer and
// no host-to-device copy is needed: the arguments stay under the classic 4 KiB limit.
//
// More tensors than fit one launch are sent in several launches, in order. The launches are
// updatable (updatable_launch.cuh): inside a CUDA graph, a replay of an optimizer step gets
// the arguments the eager step would have had.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "../../core/cuda_guard.h"
#include "../../core/error.h"
#include "../../tensor/tensor.h"
#include "device_types.cuh"
#include "elementwise.cuh"
#include "updatable_launch.cuh"

namespace kiln::cuda_kernels {

/// Tensors per launch (bounded by the 4 KiB of kernel arguments).
inline constexpr int kMultiMaxTensors = 48;
/// Elements each block updates.
inline constexpr int64_t kMultiChunk = 16384;
/// Threads per block of the multi-tensor kernels.
inline constexpr int kMultiThreads = 512;
/// Elements per vector access.
inline constexpr int kMultiVec = 4;

/// One launch's tensor lists: operand k of tensor t at ptrs[k][t] (T is the device type,
/// A the arithmetic type of the per-tensor scalars).
template <typename T, int N, typename A>
struct MultiTensorMeta {
  T* ptrs[N][kMultiMaxTensors];
  int64_t numel[kMultiMaxTensors];
  int32_t block_start[kMultiMaxTensors];
  A scalar0[kMultiMaxTensors];
  A scalar1[kMultiMaxTensors];
  int32_t count;
};

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) MultiVec {
  T v[VEC];
};

/// Runs `apply(f, values)` on every element of every tensor of `meta`: values[k] is operand
/// k's element widened to A; every operand but 1 (the gradient) is written back. `f` is the
/// base functor; each tensor's copy is f.for_tensor(scalar0[t], scalar1[t]).
template <typename T, int N, typename A, typename F, typename Apply>
__global__ void __launch_bounds__(kMultiThreads)
    multi_tensor_kernel(MultiTensorMeta<T, N, A> meta, F base, Apply apply) {
  const int32_t block = static_cast<int32_t>(blockIdx.x);
  int lo = 0, hi = meta.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (meta.block_start[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int t = lo;
  const F f = base.for_tensor(meta.scalar0[t], meta.scalar1[t]);
  const int64_t begin = static_cast<int64_t>(block - meta.block_start[t]) * kMultiChunk;
  const int64_t end = begin + kMultiChunk < meta.numel[t] ? begin + kMultiChunk : meta.numel[t];
  T* p[N];
  bool aligned = true;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    p[k] = meta.ptrs[k][t];
    aligned = aligned && reinterpret_cast<uintptr_t>(p[k]) % (sizeof(T) * kMultiVec) == 0;
  }
  int64_t scalar_from = begin;
  if (aligned) {
    const int64_t vec_end = begin + (end - begin) / kMultiVec * kMultiVec;
    for (int64_t i = begin + static_cast<int64_t>(threadIdx.x) * kMultiVec; i < vec_end;
         i += static_cast<int64_t>(blockDim.x) * kMultiVec) {
      MultiVec<T, kMultiVec> in[N];
#pragma unroll
      for (int k = 0; k < N; ++k) in[k] = *reinterpret_cast<const MultiVec<T, kMultiVec>*>(p[k] + i);
#pragma unroll
      for (int j = 0; j < kMultiVec; ++j) {
        A v[N];
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = widen(in[k].v[j]);
        apply(f, v);
#pragma unroll
        for (int k = 0; k < N; ++k) in[k].v[j] = narrow<T>(v[k]);
      }
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (k != 1) *reinterpret_cast<MultiVec<T, kMultiVec>*>(p[k] + i) = in[k];
    }
    scalar_from = vec_end;
  }
  for (int64_t i = scalar_from + threadIdx.x; i < end; i += blockDim.x) {
    A v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = widen(p[k][i]);
    apply(f, v);
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k != 1) p[k][i] = narrow<T>(v[k]);
  }
}

/// Launches multi_tensor_kernel over `lists` (N lists of equal length, contiguous tensors of
/// Kiln element type K on one CUDA device), in as few launches as kMultiMaxTensors allows;
/// scalars(i, s0, s1) gives parameter i's per-tensor scalars. Empty tensors are skipped.
template <typename K, int N, typename A, typename F, typename Apply, typename Scalars>
void multi_tensor_apply(const char* op, const std::array<std::span<const Tensor>, N>& lists, const F& base, Apply apply,
                        Scalars&& scalars) {
  using T = device_t<K>;
  using Meta = MultiTensorMeta<T, N, A>;
  static_assert(sizeof(Meta) + sizeof(F) + sizeof(Apply) <= 4000, "multi-tensor kernel arguments exceed 4 KiB");
  const std::span<const Tensor> params = lists[0];
  if (params.empty()) return;
  cuda::DeviceGuard guard(params[0].device().index());
  const cudaStream_t stream = stream_of(params[0]);
  Meta meta{};
  int64_t blocks = 0;
  auto flush = [&] {
    if (meta.count == 0) return;
    // Updatable: a captured optimizer step gets each replay's step sizes (graph_capture.h).
    launch_updatable(&multi_tensor_kernel<T, N, A, F, Apply>, dim3(static_cast<unsigned int>(blocks)),
                     dim3(kMultiThreads), stream, meta, base, apply);
    meta.count = 0;
    blocks = 0;
  };
  // One launch's grid stays below 2^31 blocks (and block_start fits int32).
  constexpr int64_t kMaxBlocks = int64_t{1} << 30;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].numel();
    if (n == 0) continue;
    const int64_t tensor_blocks = (n + kMultiChunk - 1) / kMultiChunk;
    KILN_CHECK(tensor_blocks <= kMaxBlocks, "{}: a parameter of {} elements is too large for one launch", op, n);
    if (meta.count == kMultiMaxTensors || blocks + tensor_blocks > kMaxBlocks) flush();
    const int c = meta.count;
    for (int k = 0; k < N; ++k) meta.ptrs[k][c] = static_cast<T*>(lists[static_cast<size_t>(k)][i].data_ptr());
    meta.numel[c] = n;
    meta.block_start[c] = static_cast<int32_t>(blocks);
    A s0{}, s1{};
    scalars(i, s0, s1);
    meta.scalar0[c] = s0;
    meta.scalar1[c] = s1;
    meta.count = c + 1;
    blocks += tensor_blocks;
  }
  flush();
}

}  // namespace kiln::cuda_kernels
