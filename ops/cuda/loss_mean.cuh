// The mean over rows that the CUDA loss kernels (nll_loss, cross_entropy) share, and its
// bad-target report.
//
// Deterministic: the grid is a function of the shape only; each block folds its rows into
// one partial (sum of the row losses in double, how many rows counted, the first row whose
// target is out of range) in a fixed order, and one block combines the partials in a fixed
// order. A grid of one block finishes the mean itself, so small losses are one launch;
// larger ones take a second, one-block launch. (One launch for every size would need a
// grid-wide counter to find the last block, which has to be zeroed per call: a memset, i.e.
// a second launch anyway, or per-stream state that concurrent streams would share.)
//
// The finishing thread writes NaN as the loss if any target was out of range and records
// the first such row as a device-side error (Note [Device-side errors],
// core/device_error.h): no host synchronisation per call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "../../core/cuda_check.h"
#include "../../core/device_error.h"
#include "block_reduce.cuh"
#include "device_error.cuh"
#include "device_types.cuh"

namespace kiln::cuda_kernels {

/// Threads of the combine kernel.
inline constexpr int kLossCombineThreads = 256;
/// Most blocks (so partials) of a loss kernel's grid.
inline constexpr int64_t kLossMaxBlocks = 4096;

/// The sum of counted row losses, their number, and the first bad row (`rows`: none).
struct LossPartial {
  double sum;
  long long count;
  long long bad;
  __device__ __forceinline__ static LossPartial shfl_xor(LossPartial v, int offset) {
    return {__shfl_xor_sync(0xffffffffu, v.sum, offset), __shfl_xor_sync(0xffffffffu, v.count, offset),
            __shfl_xor_sync(0xffffffffu, v.bad, offset)};
  }
};
static_assert(sizeof(LossPartial) == 3 * sizeof(int64_t));

struct LossCombine {
  __device__ __forceinline__ LossPartial operator()(const LossPartial& a, const LossPartial& b) const {
    return {a.sum + b.sum, a.count + b.count, a.bad < b.bad ? a.bad : b.bad};
  }
};

/// Where the mean and its error go.
template <typename T>
struct LossOutput {
  T* loss;                      // 0-dim
  long long* count;             // 0-dim int64
  const int64_t* target;        // [rows], to read the bad row's value
  long long rows, classes;
  cuda::DeviceErrorSlot slot;
  uint32_t kind;                // the registered "target out of bounds" message
};

/// The loss from the combined partial: sum / count (NaN when no row counts or a target is
/// out of range), the count, and the first bad row's report.
template <typename T>
__device__ __forceinline__ void finish_loss_mean(const LossPartial& p, const LossOutput<T>& o) {
  const bool bad = p.bad < o.rows;
  const double v = bad || p.count == 0 ? std::numeric_limits<double>::quiet_NaN()
                                       : p.sum / static_cast<double>(p.count);
  *o.loss = narrow<T>(static_cast<acc_t<T>>(v));
  *o.count = p.count;
  if (bad) report_device_error(o.slot, o.kind, o.target[p.bad], o.classes, p.bad);
}

/// The end of a loss kernel's block: folds every thread's partial (each block thread calls
/// it), then thread 0 finishes the mean (a grid of one) or stores the block's partial.
template <typename T>
__device__ __forceinline__ void end_loss_block(LossPartial p, LossPartial* partials, const LossOutput<T>& o) {
  __shared__ LossPartial scratch[kWarpSize];
  p = group_reduce<false>(p, LossCombine{}, LossPartial{0.0, 0, o.rows}, scratch);
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) finish_loss_mean(p, o);
  else partials[blockIdx.x] = p;
}

/// The second launch: one block adds `count` partials in a fixed order and finishes.
template <typename T>
__global__ void __launch_bounds__(kLossCombineThreads) loss_combine_kernel(const LossPartial* partials, int count,
                                                                           LossOutput<T> o) {
  LossPartial p{0.0, 0, o.rows};
  for (int j = static_cast<int>(threadIdx.x); j < count; j += static_cast<int>(blockDim.x))
    p = LossCombine{}(p, partials[j]);
  __shared__ LossPartial scratch[kWarpSize];
  p = group_reduce<false>(p, LossCombine{}, LossPartial{0.0, 0, o.rows}, scratch);
  if (threadIdx.x == 0) finish_loss_mean(p, o);
}

/// Queues the combine of `blocks` partials when the grid had more than one block.
template <typename T>
void launch_loss_combine(const LossPartial* partials, int64_t blocks, const LossOutput<T>& o, cudaStream_t stream) {
  if (blocks <= 1) return;
  loss_combine_kernel<T><<<1, kLossCombineThreads, 0, stream>>>(partials, static_cast<int>(blocks), o);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace kiln::cuda_kernels
