// CUDA nll_loss, matching ops/loss_cpu.cpp: -mean over the rows whose target is not
// ignore_index of logp[i, target[i]], summed in double; NaN when no row counts.
//
// Deterministic: a fixed grid (a function of the row count only) writes one partial
// (sum, count, first bad row) per block, and one block combines them in a fixed order; no
// atomics. Targets outside [0, C) are never used as an index: each block records its
// smallest bad row, the combine keeps the smallest of all and the target there, and writes
// NaN as the result. The host then reads that record back (a synchronizing 16-byte copy on
// the current stream) and throws the CPU's error for the FIRST bad row. While the stream is
// being captured into a CUDA graph no copy can be waited for: the check is skipped and a bad
// target shows as a NaN loss instead.
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "cuda/row_cache.cuh"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

inline constexpr int kNllThreads = 256;
/// Rows per block of the partial pass (so few rows need a single launch) and most blocks.
inline constexpr int64_t kNllRowsPerBlock = 8 * kNllThreads;
inline constexpr int64_t kNllMaxBlocks = 1024;

/// Sum of the counted log-probabilities, their number, and the first bad row (rows: none).
struct NllPartial {
  double sum;
  long long count;
  long long bad;
  __device__ __forceinline__ static NllPartial shfl_xor(NllPartial v, int offset) {
    return {__shfl_xor_sync(0xffffffffu, v.sum, offset), __shfl_xor_sync(0xffffffffu, v.count, offset),
            __shfl_xor_sync(0xffffffffu, v.bad, offset)};
  }
};

struct NllCombine {
  __device__ __forceinline__ NllPartial operator()(const NllPartial& a, const NllPartial& b) const {
    return {a.sum + b.sum, a.count + b.count, a.bad < b.bad ? a.bad : b.bad};
  }
};

/// The result from the combined partial: out = -sum / count (NaN when nothing counts or a
/// target is bad), and record = {first bad row or -1, its target}.
template <typename T>
__device__ void nll_finish(const NllPartial& p, const int64_t* target, long long rows, T* out, long long* record) {
  const bool bad = p.bad < rows;
  const double v = bad || p.count == 0 ? std::numeric_limits<double>::quiet_NaN() : -p.sum / static_cast<double>(p.count);
  *out = narrow<T>(static_cast<acc_t<T>>(v));
  record[0] = bad ? p.bad : -1;
  record[1] = bad ? static_cast<long long>(target[p.bad]) : 0;
}

/// Partial pass: block b sums the rows of its grid-stride share (one block: also finishes).
template <typename T>
__global__ void __launch_bounds__(kNllThreads)
    nll_partial_kernel(const T* __restrict__ logp, const int64_t* __restrict__ target, long long rows,
                       long long classes, long long ignore_index, NllPartial* partials, T* out, long long* record) {
  NllPartial p{0.0, 0, rows};
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = target[i];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes) {
      if (i < p.bad) p.bad = i;
      continue;
    }
    p.sum += static_cast<double>(widen(logp[i * classes + t]));
    ++p.count;
  }
  __shared__ NllPartial scratch[kWarpSize];
  p = group_reduce<false>(p, NllCombine{}, NllPartial{0.0, 0, rows}, scratch);
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) nll_finish(p, target, rows, out, record);
  else partials[blockIdx.x] = p;
}

/// Combine pass: one block adds the partials in a fixed order.
template <typename T>
__global__ void __launch_bounds__(kNllThreads)
    nll_combine_kernel(const NllPartial* partials, int count, const int64_t* target, long long rows, T* out,
                       long long* record) {
  NllPartial p{0.0, 0, rows};
  for (int j = static_cast<int>(threadIdx.x); j < count; j += static_cast<int>(blockDim.x))
    p = NllCombine{}(p, partials[j]);
  __shared__ NllPartial scratch[kWarpSize];
  p = group_reduce<false>(p, NllCombine{}, NllPartial{0.0, 0, rows}, scratch);
  if (threadIdx.x == 0) nll_finish(p, target, rows, out, record);
}

void nll_loss_cuda(const Tensor& out, const Tensor& logp, const Tensor& target, int64_t ignore_index) {
  const int64_t rows = logp.sizes()[0], classes = logp.sizes()[1];
  KILN_CHECK(logp.is_contiguous() && target.is_contiguous() && target.dtype() == DType::Int64 &&
                 target.numel() == rows && target.device() == logp.device(),
             "nll_loss: the CUDA kernel expects contiguous [N, C] log-probabilities and [N] int64 targets on one "
             "device");
  cuda::DeviceGuard guard(out.device().index());
  const cudaStream_t stream = stream_of(out);
  const int64_t blocks = std::clamp<int64_t>((rows + kNllRowsPerBlock - 1) / kNllRowsPerBlock, 1, kNllMaxBlocks);
  // Scratch from the caching allocator: the partials (3 words each) and the 2-word record.
  static_assert(sizeof(NllPartial) == 3 * sizeof(int64_t));
  const Tensor scratch = new_contiguous({3 * blocks + 2}, DType::Int64, out.device(), "nll_loss");
  auto* partials = static_cast<NllPartial*>(scratch.data_ptr());
  auto* record = reinterpret_cast<long long*>(static_cast<int64_t*>(scratch.data_ptr()) + 3 * blocks);
  const auto* t = static_cast<const int64_t*>(target.data_ptr());

  dispatch_floating(logp.dtype(), "nll_loss", [&]<typename K>() {
    using T = device_t<K>;
    const auto* lp = static_cast<const T*>(logp.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    nll_partial_kernel<T><<<static_cast<unsigned int>(blocks), kNllThreads, 0, stream>>>(
        lp, t, rows, classes, ignore_index, partials, o, record);
    CUDA_CHECK(cudaGetLastError());
    if (blocks > 1) {
      nll_combine_kernel<T><<<1, kNllThreads, 0, stream>>>(partials, static_cast<int>(blocks), t, rows, o, record);
      CUDA_CHECK(cudaGetLastError());
    }
  });

  // Note: reading the record back waits for the kernels (a synchronizing copy of 16 bytes on
  // the current stream), the price of reporting a bad target as the CPU does.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;  // bad targets show as NaN (see the top)
  long long host_record[2] = {-1, 0};
  CUDA_CHECK(cudaMemcpyAsync(host_record, record, sizeof(host_record), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  KILN_CHECK(host_record[0] < 0, "nll_loss: target {} is out of bounds for {} classes (at row {})", host_record[1],
             classes, host_record[0]);
}

}  // namespace

void register_loss_kernels() { dispatch::nll_loss_kernels.set(DeviceType::CUDA, &nll_loss_cuda); }

}  // namespace kiln::cuda_kernels
