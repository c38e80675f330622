// CUDA softmax / log_softmax along one dim, matching ops/softmax_cpu.cpp: the row max (NaN
// ignored, as fmax does; an all -inf row uses 0), the sum of exp(x - max), then
// exp(x - max) / sum or (x - max) - log(sum). So a row holding NaN or +inf, or only -inf,
// comes out all NaN on both devices. Arithmetic runs in float (double for float64).
//
// Rows are the positions of every other dim; their bases come from an Indexer over those
// dims (collapsed), element i of a row sits i * step further. Three kernels:
//   - cached (the hot case): a warp per row up to kWarpRowMax elements, else a block per
//     row; the row is read once into shared memory (16-byte loads when every row is
//     aligned and contiguous), max and sum come from the cache, and the result is written
//     once (16-byte stores when aligned);
//   - online: rows too long for shared memory; one pass keeps a running (max, rescaled
//     sum), a second pass re-reads the row and writes;
//   - column: strided rows whose neighbours are adjacent in memory (softmax over a non-last
//     dim): 32 neighbouring rows per block, so warp loads coalesce, each row split into
//     slices with a running (max, sum) merged through shared memory.
#include <cmath>
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/register.h"
#include "cuda/row_cache.cuh"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

/// Rows of `dim` over every other dim, for both tensors (0: in, 1: out).
struct SoftmaxRows {
  Indexer<2> rows_idx;  // row index -> (in, out) element offsets of the row's first element
  int64_t rows = 0, n = 0, in_step = 0, out_step = 0;
  int64_t slice = 0;  // cache elements per row group (cached kernel)
  bool vec_in = false, vec_out = false, log = false;
};

/// Threads of a column-kernel block: 32 rows x up to 16 slices.
inline constexpr int kColumnThreads = 512;

/// (in, out) offsets of row `r`; the common single outer dim skips the divisions.
__device__ __forceinline__ void row_offsets(const Indexer<2>& idx, int64_t r, int64_t (&off)[2]) {
  if (idx.ndim == 0) {
    off[0] = off[1] = 0;
  } else if (idx.ndim == 1) {
    off[0] = r * idx.strides[0][0];
    off[1] = r * idx.strides[0][1];
  } else {
    idx.offsets(r, off);
  }
}

template <typename A>
struct MaxOp {
  __device__ __forceinline__ A operator()(A a, A b) const { return fmax(a, b); }  // NaN ignored, as on the CPU
};

/// One step of the sum of exponentials: s + exp(x - m).
template <typename A>
struct AddExpShifted {
  A m;
  __device__ __forceinline__ A operator()(A s, A x) const { return s + acc_exp(x - m); }
};

/// Adds the visited elements to a running pair.
template <typename T>
struct RowOnline {
  MaxSum<acc_t<T>> st;
  __device__ __forceinline__ void operator()(const RowVec<T>& v, int64_t, int count) {
#pragma unroll
    for (int k = 0; k < kRowVec<T>; ++k)
      if (k < count) online_update(st, widen(v.v[k]));
  }
};

/// Writes softmax (exp(x - m) * inv) or log_softmax (x - m - log_sum) of the visited
/// elements to dst (element i at dst[i * step]; 16-byte stores with `vec`).
template <typename T>
struct RowWrite {
  using A = acc_t<T>;
  T* dst;
  int64_t step;
  A m, inv, log_sum;
  bool log, vec;
  __device__ __forceinline__ void operator()(const RowVec<T>& v, int64_t first, int count) const {
    RowVec<T> o;
    if (log) {
#pragma unroll
      for (int k = 0; k < kRowVec<T>; ++k)
        if (k < count) o.v[k] = narrow<T>((widen(v.v[k]) - m) - log_sum);
    } else {
#pragma unroll
      for (int k = 0; k < kRowVec<T>; ++k)
        if (k < count) o.v[k] = narrow<T>(acc_exp(widen(v.v[k]) - m) * inv);
    }
    if (vec && count == kRowVec<T>) {
      *reinterpret_cast<RowVec<T>*>(dst + first) = o;
    } else {
      for (int k = 0; k < count; ++k) dst[(first + k) * step] = o.v[k];
    }
  }
};

/// The write functor for a row with statistic (m, s).
template <typename T>
__device__ __forceinline__ RowWrite<T> row_writer(const SoftmaxRows& a, T* dst, acc_t<T> m, acc_t<T> s) {
  // s == 0 (all -inf) gives inf * 0 and -inf - -inf: NaN, as the CPU's 0 / 0.
  return {dst, a.out_step, m, acc_t<T>(1) / s, acc_log(s), a.log, a.vec_out};
}

/// One row per group (kWarp: a warp, else the block), cached in shared memory: read once,
/// max and sum from the cache, written once.
template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kWarpRowThreads : kRowBlockMax, kWarp ? kWarpRowMinBlocks : 1)
    softmax_cached_kernel(SoftmaxRows a, const T* __restrict__ in, T* __restrict__ out) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ A scratch[kWarpSize];
  const RowGroup g = row_group<kWarp>();
  T* cache = reinterpret_cast<T*>(smem_raw) + static_cast<int64_t>(g.slot) * a.slice;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for (int64_t row = g.first_row; row < a.rows; row += g.row_step) {
    int64_t off[2];
    row_offsets(a.rows_idx, row, off);
    group_sync<kWarp>();  // the previous row's cache reads are done
    RowFold<T, MaxOp<A>> mx{kNegInf, {}};
    CacheStore<T, RowFold<T, MaxOp<A>>> store{cache, mx};
    visit_row(in + off[0], a.n, a.in_step, a.vec_in, g.tid, g.size, store);
    group_sync<kWarp>();
    A m = group_reduce<kWarp>(mx.acc, MaxOp<A>{}, kNegInf, scratch);
    if (m == kNegInf) m = A(0);  // an all -inf row: exp(x - 0) = 0 everywhere
    RowFold<T, AddExpShifted<A>> se{A(0), {m}};
    visit_row<kFromCache>(cache, a.n, 1, true, g.tid, g.size, se);
    const A s = group_reduce<kWarp>(se.acc, SumOp{}, A(0), scratch);
    RowWrite<T> w = row_writer<T>(a, out + off[1], m, s);
    visit_row<kFromCache>(cache, a.n, 1, true, g.tid, g.size, w);
  }
}

/// One row per block, too long to cache: an online (max, sum) pass, then a write pass that
/// reads the row again.
template <typename T>
__global__ void __launch_bounds__(kRowBlockMax)
    softmax_online_kernel(SoftmaxRows a, const T* __restrict__ in, T* __restrict__ out) {
  using A = acc_t<T>;
  __shared__ MaxSum<A> scratch[kWarpSize];
  const RowGroup g = row_group<false>();
  const MaxSum<A> empty{-std::numeric_limits<A>::infinity(), A(0)};
  for (int64_t row = g.first_row; row < a.rows; row += g.row_step) {
    int64_t off[2];
    row_offsets(a.rows_idx, row, off);
    RowOnline<T> on{empty};
    visit_row(in + off[0], a.n, a.in_step, a.vec_in, g.tid, g.size, on);
    MaxSum<A> st = group_reduce<false>(on.st, MergeMaxSum<A>{}, empty, scratch);
    finish_max_sum(st);
    RowWrite<T> w = row_writer<T>(a, out + off[1], st.m, st.s);
    visit_row(in + off[0], a.n, a.in_step, a.vec_in, g.tid, g.size, w);
  }
}

/// Strided rows whose neighbours sit side by side in memory (softmax over a non-last dim):
/// a block takes 32 neighbouring rows (threadIdx.x), so each warp load covers neighbouring
/// elements, and splits every row into blockDim.y interleaved slices (threadIdx.y). Each
/// thread keeps a running (max, sum) of its slice; the slices' pairs are merged through
/// shared memory in a fixed order, then each thread writes its slice.
template <typename T>
__global__ void __launch_bounds__(kColumnThreads) softmax_column_kernel(SoftmaxRows a, const T* __restrict__ in,
                                                                        T* __restrict__ out) {
  using A = acc_t<T>;
  __shared__ MaxSum<A> part[kColumnThreads / kWarpSize][kWarpSize];
  const MaxSum<A> empty{-std::numeric_limits<A>::infinity(), A(0)};
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int slices = static_cast<int>(blockDim.y);
  for (int64_t tile = blockIdx.x; tile * kWarpSize < a.rows; tile += gridDim.x) {
    const int64_t row = tile * kWarpSize + tx;
    const bool active = row < a.rows;
    int64_t off[2] = {0, 0};
    if (active) row_offsets(a.rows_idx, row, off);
    const T* x = in + off[0];
    MaxSum<A> st = empty;
    if (active)
      for (int64_t i = ty; i < a.n; i += slices) online_update(st, widen(x[i * a.in_step]));
    part[ty][tx] = st;
    __syncthreads();
    st = part[0][tx];
    for (int y = 1; y < slices; ++y) st = MergeMaxSum<A>{}(st, part[y][tx]);
    finish_max_sum(st);
    if (active) {
      const RowWrite<T> w = row_writer<T>(a, out + off[1], st.m, st.s);
      for (int64_t i = ty; i < a.n; i += slices) {
        RowVec<T> v;
        v.v[0] = x[i * a.in_step];
        w(v, i, 1);
      }
    }
    __syncthreads();  // part is reused by the next tile
  }
}

/// Whether the first element of every row (data + the outer strides) is 16-byte aligned.
bool rows_aligned(const void* data, const Indexer<2>& idx, int k, size_t elem) {
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) return false;
  for (int d = 0; d < idx.ndim; ++d)
    if ((idx.strides[d][k] * static_cast<int64_t>(elem)) % 16 != 0) return false;
  return true;
}

/// Picks the kernel for the row layout and launches it on out's current stream.
template <typename T>
void launch_softmax(SoftmaxRows a, const Tensor& out, const Tensor& in) {
  const int device = out.device().index();
  const cudaStream_t stream = stream_of(out);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  a.vec_in = a.in_step == 1 && rows_aligned(x, a.rows_idx, 0, sizeof(T));
  a.vec_out = a.out_step == 1 && rows_aligned(y, a.rows_idx, 1, sizeof(T));

  // Column kernel: strided rows, side by side (the input's innermost outer dim steps by 0
  // or 1). Enough slices per row to give the GPU ~2^18 threads, at most one per element.
  const int nd = a.rows_idx.ndim;
  const bool side_by_side = nd > 0 && (a.rows_idx.strides[nd - 1][0] == 0 || a.rows_idx.strides[nd - 1][0] == 1);
  if (a.in_step != 1 && side_by_side) {
    const int64_t tiles = (a.rows + kWarpSize - 1) / kWarpSize;
    int slices = 1;
    while (slices < kColumnThreads / kWarpSize && slices < a.n && tiles * kWarpSize * slices < (int64_t{1} << 18))
      slices *= 2;
    const dim3 block(kWarpSize, static_cast<unsigned int>(slices));
    softmax_column_kernel<T><<<row_blocks(tiles, 1), block, 0, stream>>>(a, x, y);
    CUDA_CHECK(cudaGetLastError());
    return;
  }

  a.slice = cache_elems<T>(a.n);
  if (a.n <= kWarpRowMax) {
    constexpr int per_block = kWarpRowThreads / kWarpSize;
    const size_t smem = static_cast<size_t>(per_block * a.slice) * sizeof(T);  // at most 32 KiB
    softmax_cached_kernel<T, true><<<row_blocks(a.rows, per_block), kWarpRowThreads, smem, stream>>>(a, x, y);
  } else if (static_cast<size_t>(a.slice) * sizeof(T) <= row_cache_budget(device)) {
    const size_t smem = static_cast<size_t>(a.slice) * sizeof(T);
    allow_dynamic_smem(reinterpret_cast<const void*>(&softmax_cached_kernel<T, false>), device, smem);
    softmax_cached_kernel<T, false>
        <<<row_blocks(a.rows, 1), row_block_threads(a.n, kRowVec<T>), smem, stream>>>(a, x, y);
  } else {
    softmax_online_kernel<T><<<row_blocks(a.rows, 1), kRowBlockMax, 0, stream>>>(a, x, y);
  }
  CUDA_CHECK(cudaGetLastError());
}

void softmax_cuda(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  if (in.numel() == 0) return;
  SoftmaxRows a;
  a.log = log;
  a.n = 1;
  a.in_step = a.out_step = 1;
  // The other dims, collapsed: each position is one row.
  DimValues outer_sizes, in_strides, out_strides;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const size_t k = static_cast<size_t>(d);
    if (d == dim) {
      a.n = in.sizes()[k];
      a.in_step = in.strides()[k];
      a.out_step = out.strides()[k];
      continue;
    }
    outer_sizes.push_back(in.sizes()[k]);
    in_strides.push_back(in.strides()[k]);
    out_strides.push_back(out.strides()[k]);
  }
  const CollapsedDims<2> dims = collapse_dims<2>(outer_sizes, {&in_strides, &out_strides});
  KILN_CHECK(static_cast<int>(dims.sizes.size()) <= kMaxDims,
             "{}: the input's layout needs {} dims after collapsing; the CUDA kernels index at most {} (call "
             "contiguous() on the input)",
             op, dims.sizes.size(), kMaxDims);
  a.rows = in.numel() / a.n;
  a.rows_idx.ndim = static_cast<int>(dims.sizes.size());
  for (int d = 0; d < a.rows_idx.ndim; ++d) {
    const size_t k = static_cast<size_t>(d);
    a.rows_idx.sizes[d] = dims.sizes[k];
    a.rows_idx.strides[d][0] = dims.strides[k][0];
    a.rows_idx.strides[d][1] = dims.strides[k][1];
  }
  cuda::DeviceGuard guard(out.device().index());
  dispatch_floating(in.dtype(), op, [&]<typename K>() { launch_softmax<device_t<K>>(a, out, in); });
}

}  // namespace

void register_softmax_kernels() { dispatch::softmax_kernels.set(DeviceType::CUDA, &softmax_cuda); }

}  // namespace kiln::cuda_kernels
