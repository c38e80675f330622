// CUDA layer norm over the rows of a contiguous [rows, n] input, matching
// ops/layer_norm_cpu.cpp: two passes per row (the mean, then the mean of the squared
// centred values, which stays accurate where E[x^2] - E[x]^2 cancels), then
// (x - mean) * rstd * weight + bias. Statistics accumulate in float (double for float64);
// mean and rstd are stored as float32 for the backward pass.
//
// The row structure is softmax's (cuda/row_cache.cuh): a warp per row up to kWarpRowMax
// elements, else a block per row; the row is read once into shared memory (16-byte loads
// when rows, output, weight and bias are aligned), both statistics come from the cache and
// the result is written once. Rows too long for shared memory run the same three passes
// over global memory.
#include <limits>

#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "cuda/row_cache.cuh"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct LayerNormArgs {
  const T* in;
  T* out;
  const T* weight;  // null: 1
  const T* bias;    // null: 0
  float* mean;
  float* rstd;
  int64_t rows, n;
  int64_t slice;  // cache elements per row group (0: not cached)
  acc_t<T> eps;
  bool vec;  // every row of in and out, weight and bias 16-byte aligned
};

/// One step of the variance pass: s + (x - mean)^2.
template <typename A>
struct AddSquaredDeviation {
  A mean;
  __device__ __forceinline__ A operator()(A s, A x) const {
    const A c = x - mean;
    return s + c * c;
  }
};

/// Writes (x - mean) * rstd * weight + bias of the visited elements to the output row.
template <typename T>
struct RowNormalize {
  using A = acc_t<T>;
  T* dst;
  const T* weight;
  const T* bias;
  A mean, rstd;
  bool vec;
  __device__ __forceinline__ void operator()(const RowVec<T>& v, int64_t first, int count) const {
    constexpr int V = kRowVec<T>;
    const bool whole = vec && count == V;
    RowVec<T> w, b;
    if (weight) {
      if (whole) w = *reinterpret_cast<const RowVec<T>*>(weight + first);
      else
        for (int k = 0; k < count; ++k) w.v[k] = weight[first + k];
    }
    if (bias) {
      if (whole) b = *reinterpret_cast<const RowVec<T>*>(bias + first);
      else
        for (int k = 0; k < count; ++k) b.v[k] = bias[first + k];
    }
    RowVec<T> o;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (k < count) {
        A y = (widen(v.v[k]) - mean) * rstd;
        if (weight) y *= widen(w.v[k]);
        if (bias) y += widen(b.v[k]);
        o.v[k] = narrow<T>(y);
      }
    }
    if (whole) {
      *reinterpret_cast<RowVec<T>*>(dst + first) = o;
    } else {
      for (int k = 0; k < count; ++k) dst[first + k] = o.v[k];
    }
  }
};

/// The variance pass, the statistics and the write pass over a row whose elements are at
/// src (the cache, or global memory when the row is not cached; U: visit_row's loads in
/// flight); `mean` is already known.
template <int U, typename T, bool kWarp>
__device__ __forceinline__ void normalize_row(const LayerNormArgs<T>& a, const T* src, bool vec, int64_t row,
                                              acc_t<T> mean, const RowGroup& g, acc_t<T>* scratch) {
  using A = acc_t<T>;
  RowFold<T, AddSquaredDeviation<A>> sq{A(0), {mean}};
  visit_row<U>(src, a.n, 1, vec, g.tid, g.size, sq);
  const A var = group_reduce<kWarp>(sq.acc, SumOp{}, A(0), scratch) / static_cast<A>(a.n);
  const A rstd = A(1) / acc_sqrt(var + a.eps);
  if (g.tid == 0) {
    a.mean[row] = static_cast<float>(mean);
    a.rstd[row] = static_cast<float>(rstd);
  }
  RowNormalize<T> w{a.out + row * a.n, a.weight, a.bias, mean, rstd, a.vec};
  visit_row<U>(src, a.n, 1, vec, g.tid, g.size, w);
}

/// One row per group (kWarp: a warp, else the block), cached in shared memory: read once,
/// both statistics from the cache, written once.
template <typename T, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kWarpRowThreads : kRowBlockMax, kWarp ? kWarpRowMinBlocks : 1)
    layer_norm_cached_kernel(LayerNormArgs<T> a) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ A scratch[kWarpSize];
  const RowGroup g = row_group<kWarp>();
  T* cache = reinterpret_cast<T*>(smem_raw) + static_cast<int64_t>(g.slot) * a.slice;
  for (int64_t row = g.first_row; row < a.rows; row += g.row_step) {
    group_sync<kWarp>();  // the previous row's cache reads are done
    RowFold<T, SumOp> sum{A(0), {}};
    CacheStore<T, RowFold<T, SumOp>> store{cache, sum};
    visit_row(a.in + row * a.n, a.n, 1, a.vec, g.tid, g.size, store);
    group_sync<kWarp>();
    const A mean = group_reduce<kWarp>(sum.acc, SumOp{}, A(0), scratch) / static_cast<A>(a.n);
    normalize_row<kFromCache, T, kWarp>(a, cache, true, row, mean, g, scratch);
  }
}

/// One row per block, too long to cache: the three passes read global memory.
template <typename T>
__global__ void __launch_bounds__(kRowBlockMax) layer_norm_uncached_kernel(LayerNormArgs<T> a) {
  using A = acc_t<T>;
  __shared__ A scratch[kWarpSize];
  const RowGroup g = row_group<false>();
  for (int64_t row = g.first_row; row < a.rows; row += g.row_step) {
    const T* src = a.in + row * a.n;
    RowFold<T, SumOp> sum{A(0), {}};
    visit_row(src, a.n, 1, a.vec, g.tid, g.size, sum);
    const A mean = group_reduce<false>(sum.acc, SumOp{}, A(0), scratch) / static_cast<A>(a.n);
    normalize_row<2, T, false>(a, src, a.vec, row, mean, g, scratch);
  }
}

template <typename T>
bool aligned16(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T>
void launch_layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, double eps) {
  LayerNormArgs<T> a{};
  a.in = static_cast<const T*>(in.data_ptr());
  a.out = static_cast<T*>(out.data_ptr());
  a.weight = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
  a.bias = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  a.mean = mean.data_ptr<float>();
  a.rstd = rstd.data_ptr<float>();
  a.rows = in.sizes()[0];
  a.n = in.sizes()[1];
  a.eps = static_cast<acc_t<T>>(eps);
  a.vec = (a.n * static_cast<int64_t>(sizeof(T))) % 16 == 0 && aligned16(a.in) && aligned16(a.out) &&
          (!a.weight || aligned16(a.weight)) && (!a.bias || aligned16(a.bias));

  const int device = out.device().index();
  const cudaStream_t stream = stream_of(out);
  a.slice = cache_elems<T>(a.n);
  const size_t row_bytes = static_cast<size_t>(a.slice) * sizeof(T);
  if (a.n <= kWarpRowMax) {
    constexpr int per_block = kWarpRowThreads / kWarpSize;
    const size_t smem = per_block * row_bytes;  // at most 32 KiB
    layer_norm_cached_kernel<T, true><<<row_blocks(a.rows, per_block), kWarpRowThreads, smem, stream>>>(a);
  } else if (row_bytes <= row_cache_budget(device)) {
    allow_dynamic_smem(reinterpret_cast<const void*>(&layer_norm_cached_kernel<T, false>), device, row_bytes);
    layer_norm_cached_kernel<T, false>
        <<<row_blocks(a.rows, 1), row_block_threads(a.n, kRowVec<T>), row_bytes, stream>>>(a);
  } else {
    a.slice = 0;
    layer_norm_uncached_kernel<T><<<row_blocks(a.rows, 1), kRowBlockMax, 0, stream>>>(a);
  }
  CUDA_CHECK(cudaGetLastError());
}

void layer_norm_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                     const Tensor& weight, const Tensor& bias, double eps) {
  KILN_CHECK(in.dim() == 2 && in.is_contiguous() && out.is_contiguous(),
             "layer_norm: the CUDA kernel expects contiguous [rows, n] input and output");
  if (in.sizes()[0] == 0) return;
  cuda::DeviceGuard guard(out.device().index());
  dispatch_floating(in.dtype(), "layer_norm", [&]<typename K>() {
    launch_layer_norm<device_t<K>>(out, mean, rstd, in, weight, bias, eps);
  });
}

}  // namespace

void register_layer_norm_kernels() { dispatch::layer_norm_kernels.set(DeviceType::CUDA, &layer_norm_cuda); }

}  // namespace kiln::cuda_kernels
