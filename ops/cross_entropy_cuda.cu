// CUDA cross_entropy, fused: one pass over the logits [rows, C] computes each row's
// log-sum-exp (the online (max, sum of exp) statistic of ops/cuda/online_softmax.cuh, with
// the CPU softmax's NaN and infinity rules), keeps it for the backward (lse [rows], float32
// or float64), gathers the target's logit and adds lse - logit to the block's partial of the
// mean (ops/cuda/loss_mean.cuh). The log-probabilities are never written. Small losses are
// one launch ([256, 10]: one block); larger ones add the one-block combine.
//
// Rows go to groups of lanes sized to C (ops/cuda/class_rows.cuh): 4 or 32 lanes of a warp
// that reduce with shuffles, or a whole block per row for C > kWarpRowMax. Arithmetic runs in
// float (double for float64), the mean in double, matching ops/loss_cpu.cpp within rounding.
//
// No host synchronisation: a target outside [0, C) (and not ignore_index) is never used as
// an index; the loss becomes NaN and the first such row is recorded as a device-side error,
// raised as "cross_entropy: target 12 is out of bounds for 10 classes (at row 3)" at the next
// synchronisation (Note [Device-side errors], core/device_error.h).
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cuda/class_rows.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/loss_mean.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct CrossEntropyArgs {
  const T* logits;                // [rows, C]
  acc_t<T>* lse;                  // [rows]
  long long ignore_index;
  LossPartial* partials;          // [gridDim.x] when gridDim.x > 1
  LossOutput<T> out;              // rows, classes, target, the mean's outputs
};

/// Folds the visited elements into a running (max, sum) pair.
template <typename A>
struct OnlineFold {
  MaxSum<A> st;
  __device__ __forceinline__ void operator()(A x) { online_update(st, x); }
};

/// A row's end, in one thread of its group: its lse, and its loss added to the partial
/// (or its row recorded as bad).
template <typename T>
__device__ __forceinline__ void finish_row(const CrossEntropyArgs<T>& a, int64_t row, MaxSum<acc_t<T>> st,
                                           LossPartial& p) {
  using A = acc_t<T>;
  finish_max_sum(st);
  const A log_sum = acc_log(st.s);
  a.lse[row] = st.m + log_sum;
  const long long t = a.out.target[row];
  if (t == a.ignore_index) return;
  if (t < 0 || t >= a.out.classes) {
    if (row < p.bad) p.bad = row;
    return;
  }
  // lse - x[t] as (m - x[t]) + log(sum): no cancellation of two large numbers.
  p.sum += static_cast<double>((st.m - widen(a.logits[row * a.out.classes + t])) + log_sum);
  ++p.count;
}

/// G lanes per row (4 or 32), 256 / G rows of a block at a time. Every lane of a warp runs
/// the same iterations (the loop bound depends on the block only), so the shuffles of a
/// group whose row is past the end still have all their lanes.
template <typename T, int G>
__global__ void __launch_bounds__(kLaneRowThreads) cross_entropy_lanes_kernel(CrossEntropyArgs<T> a) {
  using A = acc_t<T>;
  const MaxSum<A> empty{-std::numeric_limits<A>::infinity(), A(0)};
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int64_t per_block = static_cast<int64_t>(blockDim.x) / G;
  const int64_t group = static_cast<int64_t>(threadIdx.x) / G;
  const int64_t rows = a.out.rows, classes = a.out.classes;
  LossPartial p{0.0, 0, rows};
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + group;
    OnlineFold<A> fold{empty};
    if (row < rows) for_row_elements(a.logits + row * classes, classes, lane, G, fold);
    const MaxSum<A> st = lanes_reduce<G>(fold.st, MergeMaxSum<A>{});
    if (row < rows && lane == 0) finish_row(a, row, st, p);
  }
  end_loss_block(p, a.partials, a.out);
}

/// A block per row (C > kWarpRowMax), rows strided by the grid.
template <typename T>
__global__ void __launch_bounds__(kRowBlockMax) cross_entropy_block_kernel(CrossEntropyArgs<T> a) {
  using A = acc_t<T>;
  const MaxSum<A> empty{-std::numeric_limits<A>::infinity(), A(0)};
  __shared__ MaxSum<A> scratch[kWarpSize];
  const int64_t rows = a.out.rows, classes = a.out.classes;
  LossPartial p{0.0, 0, rows};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    OnlineFold<A> fold{empty};
    for_row_elements(a.logits + row * classes, classes, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                     fold);
    const MaxSum<A> st = group_reduce<false>(fold.st, MergeMaxSum<A>{}, empty, scratch);
    if (threadIdx.x == 0) finish_row(a, row, st, p);
  }
  end_loss_block(p, a.partials, a.out);
}

/// The device-side error a bad target records (registered on first use).
uint32_t bad_target_kind() {
  static const uint32_t kind =
      cuda::register_device_error("cross_entropy: target {0} is out of bounds for {1} classes (at row {2})");
  return kind;
}

void cross_entropy_cuda(const Tensor& loss, const Tensor& lse, const Tensor& count, const Tensor& logits,
                        const Tensor& target, int64_t ignore_index) {
  const int64_t rows = logits.sizes()[0], classes = logits.sizes()[1];
  KILN_INTERNAL_ASSERT(logits.is_contiguous() && target.is_contiguous() && target.dtype() == DType::Int64 &&
                           target.numel() == rows && lse.numel() == rows,
                       "cross_entropy: the CUDA kernel expects contiguous [N, C] logits, [N] int64 targets, [N] lse");
  const uint32_t bad_target = bad_target_kind();
  const int device = loss.device().index();
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(loss);
  ClassRowsLaunch l = class_rows_launch(rows, classes, element_size(logits.dtype()), kLossMaxBlocks);
  // A grid that would loop a few times anyway runs as one block: no combine launch.
  const int64_t groups_per_block = l.lanes == 0 ? 1 : l.threads / l.lanes;
  if (rows <= 4 * groups_per_block) l.blocks = 1;
  const Tensor scratch =
      l.blocks > 1 ? new_contiguous({3 * static_cast<int64_t>(l.blocks)}, DType::Int64, loss.device(), "cross_entropy")
                   : Tensor();
  auto* partials = l.blocks > 1 ? static_cast<LossPartial*>(scratch.data_ptr()) : nullptr;
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename K>() {
    using T = device_t<K>;
    const LossOutput<T> out{static_cast<T*>(loss.data_ptr()),
                            static_cast<long long*>(count.data_ptr()),
                            static_cast<const int64_t*>(target.data_ptr()),
                            rows,
                            classes,
                            cuda::device_error_slot(device),
                            bad_target};
    const CrossEntropyArgs<T> a{static_cast<const T*>(logits.data_ptr()), static_cast<acc_t<T>*>(lse.data_ptr()),
                                ignore_index, partials, out};
    if (l.lanes == 4)
      cross_entropy_lanes_kernel<T, 4><<<l.blocks, l.threads, 0, stream>>>(a);
    else if (l.lanes == kWarpSize)
      cross_entropy_lanes_kernel<T, kWarpSize><<<l.blocks, l.threads, 0, stream>>>(a);
    else
      cross_entropy_block_kernel<T><<<l.blocks, l.threads, 0, stream>>>(a);
    CUDA_CHECK(cudaGetLastError());
    launch_loss_combine(partials, l.blocks, a.out, stream);
  });
}

}  // namespace

void register_cross_entropy_kernels() { dispatch::cross_entropy_kernels.set(DeviceType::CUDA, &cross_entropy_cuda); }

}  // namespace kiln::cuda_kernels
