// CUDA reductions (sum, mean, max, min, argmax, argmin) over the trailing dims of a strided
// view, computing what ops/reduce_cpu.cpp computes: float32/float64 sums accumulate in double,
// float16/bfloat16 in float, integers and bool in int64; max/min propagate NaN; arg-reductions
// return the first index of the extreme value with NaN as the extreme.
//
// One kernel per (dtype, op) covers every layout (plus a twin for reduced blocks that stay
// multi-dim after collapsing, whose per-element index arithmetic costs registers); the host
// picks its thread layout:
//   - row mode: the reduced block's innermost dim is contiguous, so threadIdx.x walks the
//     block (coalesced; 16-byte loads when the block is one contiguous run) and threadIdx.y
//     picks the output;
//   - column mode: anything else; threadIdx.x picks consecutive outputs (coalesced when the
//     kept dims are innermost) and threadIdx.y splits each output's block.
// Sum/mean/max/min do not care about visiting order, so their blocks are walked in memory
// order (a full reduction of a transposed tensor reads one contiguous run).
// When there are too few outputs to fill the GPU, grid.y splits each block further: every
// block writes one partial accumulator per output into a scratch tensor and a second kernel
// combines them in a fixed order, so results are deterministic (no atomics). Arg pairs break
// ties (and NaN against NaN) by the smaller index, so any combine order gives the CPU's
// first-index answer.
#include <cuda/std/limits>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cuda/block_reduce.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"
#include "wrapping.h"

namespace kiln::cuda_kernels {

namespace {

/// Independent accumulators per thread (and 16-byte loads in flight on the vectorised path).
constexpr int kUnroll = 4;
/// Scalar loads in flight per thread on the strided path (column mode, short rows).
constexpr int kStridedLoads = 8;
/// Index of an arg accumulator that has seen no element (loses every tie).
constexpr int64_t kNoIndex = INT64_MAX;

/// A (value, index) pair carried by the arg reductions.
template <typename A>
struct ArgPair {
  A v;
  int64_t i;
  /// The pair from lane (lane ^ offset), member by member (block_reduce.cuh's protocol).
  __device__ __forceinline__ static ArgPair shfl_xor(ArgPair p, int offset) {
    return {lane_shuffle_xor(p.v, offset), lane_shuffle_xor(p.i, offset)};
  }
};

template <typename A>
__device__ __forceinline__ bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return v != v;
  else return false;
}

/// The smallest value of A (-inf for floats), the start of a max.
template <typename A>
__device__ __forceinline__ A lowest() {
  if constexpr (std::is_floating_point_v<A>) return -::cuda::std::numeric_limits<A>::infinity();
  else return ::cuda::std::numeric_limits<A>::lowest();
}

/// The largest value of A (+inf for floats), the start of a min.
template <typename A>
__device__ __forceinline__ A highest() {
  if constexpr (std::is_floating_point_v<A>) return ::cuda::std::numeric_limits<A>::infinity();
  else return ::cuda::std::numeric_limits<A>::max();
}

/// The sum accumulator: double for float32/float64, float for the 16-bit floats, int64 for
/// integers and bool.
template <typename T>
using sum_t = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double,
                                 std::conditional_t<is_half_v<T>, float, int64_t>>;

/// Arg reductions carry (value, index) pairs.
__host__ __device__ constexpr bool is_arg(ReduceOp op) { return op == ReduceOp::ArgMax || op == ReduceOp::ArgMin; }
/// Max and ArgMax keep the largest value, Min and ArgMin the smallest.
__host__ __device__ constexpr bool is_max(ReduceOp op) { return op == ReduceOp::Max || op == ReduceOp::ArgMax; }

/// One reduction over device element type T: the accumulator V, its identity, how an element
/// enters it, the (associative, commutative) combine and the final value written to out.
/// Op is Sum (also Mean, with `mean` set), Max, Min, ArgMax or ArgMin.
template <typename T, ReduceOp Op>
struct Reducer {
  static constexpr bool kArg = is_arg(Op);
  using A = acc_t<T>;
  using V = std::conditional_t<Op == ReduceOp::Sum, sum_t<T>, std::conditional_t<kArg, ArgPair<A>, A>>;
  using Out = std::conditional_t<kArg || (Op == ReduceOp::Sum && !std::is_floating_point_v<A>), int64_t, T>;

  bool mean;  ///< Sum only: divide by the block's element count at the end

  __device__ __forceinline__ V identity() const {
    if constexpr (Op == ReduceOp::Sum) return V(0);
    else if constexpr (kArg) return V{is_max(Op) ? lowest<A>() : highest<A>(), kNoIndex};
    else return is_max(Op) ? lowest<A>() : highest<A>();
  }

  __device__ __forceinline__ V load(T x, int64_t index) const {
    if constexpr (Op == ReduceOp::Sum) return static_cast<V>(widen(x));
    else if constexpr (kArg) return V{widen(x), index};
    else return widen(x);
  }

  __device__ __forceinline__ V combine(V a, V b) const {
    if constexpr (Op == ReduceOp::Sum) {
      return wrapping_add(a, b);  // integer sums wrap modulo 2^64, as the CPU's
    } else if constexpr (kArg) {
      // NaN beats any number; equal values (or two NaNs) go to the smaller index.
      const bool an = is_nan(a.v), bn = is_nan(b.v);
      bool take_b;
      if (an || bn) take_b = (an && bn) ? b.i < a.i : bn;
      else if (a.v == b.v) take_b = b.i < a.i;
      else take_b = is_max(Op) ? b.v > a.v : b.v < a.v;
      return take_b ? b : a;
    } else {
      if (is_nan(a)) return a;
      if (is_nan(b)) return b;
      if constexpr (is_max(Op)) return b > a ? b : a;
      else return b < a ? b : a;
    }
  }

  /// The output value of an accumulator over `n` elements.
  __device__ __forceinline__ Out finish(V acc, int64_t n) const {
    if constexpr (Op == ReduceOp::Sum) {
      if constexpr (std::is_floating_point_v<A>) {
        if (mean) {
          // As the CPU: the mean in double, then through A to T.
          const double m = n == 0 ? ::cuda::std::numeric_limits<double>::quiet_NaN()
                                  : static_cast<double>(acc) / static_cast<double>(n);
          return narrow<T>(static_cast<A>(m));
        }
        return narrow<T>(static_cast<A>(acc));
      } else {
        return acc;
      }
    } else if constexpr (kArg) {
      return acc.i == kNoIndex ? 0 : acc.i;
    } else {
      return narrow<T>(acc);
    }
  }
};

/// Where each output's block lives in `in`, and how the threads walk it.
struct Layout {
  int64_t outputs = 0;  ///< out.numel()
  int64_t length = 0;   ///< elements per reduced block
  Indexer<1> kept;      ///< output index -> element offset of its block in `in`
  Indexer<1> block;     ///< flat index in the block -> element offset (ndim 0: one element)
  bool row = false;     ///< row mode (threadIdx.x walks a block) or column mode
  bool vectorized = false;  ///< row mode over one contiguous run: 16-byte loads
};

/// Element offset of linear index i under ix. No division for 0 or 1 dims; 32-bit division
/// (several times cheaper than 64-bit) when `small`: the indexed shape has < 2^32 elements.
__device__ __forceinline__ int64_t offset_of(const Indexer<1>& ix, int64_t i, bool small) {
  if (ix.ndim == 0) return 0;
  if (ix.ndim == 1) return i * ix.strides[0][0];
  int64_t off = 0;
  if (small) {
    auto rest = static_cast<uint32_t>(i);
    for (int d = ix.ndim - 1; d >= 0; --d) {
      const auto size = static_cast<uint32_t>(ix.sizes[d]);
      const uint32_t q = rest / size;
      off += static_cast<int64_t>(rest - q * size) * ix.strides[d][0];
      rest = q;
    }
  } else {
    int64_t rest = i;
    for (int d = ix.ndim - 1; d >= 0; --d) {
      const int64_t q = rest / ix.sizes[d];
      off += (rest - q * ix.sizes[d]) * ix.strides[d][0];
      rest = q;
    }
  }
  return off;
}

struct LinearOffset {
  int64_t stride;
  __device__ __forceinline__ int64_t operator()(int64_t r) const { return r * stride; }
};

struct IndexedOffset {
  const Indexer<1>& ix;
  bool small;
  __device__ __forceinline__ int64_t operator()(int64_t r) const { return offset_of(ix, r, small); }
};

/// Folds elements lane, lane + lanes, ... (< n) of the block at `base` into acc, with kLoads
/// loads in flight (spread over the kUnroll accumulators).
template <int kLoads, typename R, typename T, typename Off>
__device__ __forceinline__ void accumulate_strided(const R& red, typename R::V (&acc)[kUnroll], const T* base, Off off,
                                                   int64_t n, int64_t lane, int64_t lanes) {
  int64_t r = lane;
  for (; r + (kLoads - 1) * lanes < n; r += kLoads * lanes) {
    T x[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) x[j] = base[off(r + j * lanes)];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) acc[j % kUnroll] = red.combine(acc[j % kUnroll], red.load(x[j], r + j * lanes));
  }
  for (; r < n; r += lanes) acc[0] = red.combine(acc[0], red.load(base[off(r)], r));
}

/// Folds this lane's share of the contiguous run row[0, n) into acc: a scalar head up to the
/// first 16-byte boundary, 16-byte vectors (kUnroll in flight), then a scalar tail.
template <typename R, typename T>
__device__ __forceinline__ void accumulate_vectorized(const R& red, typename R::V (&acc)[kUnroll], const T* row,
                                                      int64_t n, int64_t lane, int64_t lanes) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using VecT = Vec<T, kVec>;
  const int64_t misaligned = static_cast<int64_t>((reinterpret_cast<uintptr_t>(row) % 16) / sizeof(T));
  const int64_t head = misaligned == 0 ? 0 : (kVec - misaligned < n ? kVec - misaligned : n);
  for (int64_t i = lane; i < head; i += lanes) acc[0] = red.combine(acc[0], red.load(row[i], i));
  const int64_t vectors = (n - head) / kVec;
  const VecT* body = reinterpret_cast<const VecT*>(row + head);
  int64_t v = lane;
  for (; v + (kUnroll - 1) * lanes < vectors; v += kUnroll * lanes) {
    VecT x[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) x[j] = body[v + j * lanes];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t first = head + (v + j * lanes) * kVec;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[j] = red.combine(acc[j], red.load(x[j].v[e], first + e));
    }
  }
  for (; v < vectors; v += lanes) {
    const VecT x = body[v];
    const int64_t first = head + v * kVec;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[0] = red.combine(acc[0], red.load(x.v[e], first + e));
  }
  for (int64_t i = head + vectors * kVec + lane; i < n; i += lanes) acc[0] = red.combine(acc[0], red.load(row[i], i));
}

/// Combines acc over the threads of the block that share an output (threadIdx.x in row mode,
/// threadIdx.y in column mode); the result is valid in the thread whose in-block lane is 0.
/// Every thread of the block must call it (it synchronises); the block is whole warps.
template <typename R>
__device__ __forceinline__ typename R::V block_combine(const R& red, typename R::V acc, bool row, typename R::V* smem) {
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int bx = static_cast<int>(blockDim.x), by = static_cast<int>(blockDim.y);
  if (row) {
    // bx is a power of two, so groups of bx <= 32 lanes are aligned within warps.
    const int width = bx < kWarpSize ? bx : kWarpSize;
    for (int offset = width / 2; offset > 0; offset /= 2) acc = red.combine(acc, lane_shuffle_xor(acc, offset));
    if (bx <= kWarpSize) return acc;
    const int tid = ty * bx + tx;
    __syncthreads();  // smem may still be read by the previous output's combine
    if (tid % kWarpSize == 0) smem[tid / kWarpSize] = acc;
    __syncthreads();
    if (tx == 0)
      for (int w = 1; w < bx / kWarpSize; ++w) acc = red.combine(acc, smem[tid / kWarpSize + w]);
    return acc;
  }
  if (by == 1) return acc;
  __syncthreads();
  smem[ty * bx + tx] = acc;
  __syncthreads();
  for (int s = by / 2; s > 0; s /= 2) {
    if (ty < s) smem[ty * bx + tx] = red.combine(smem[ty * bx + tx], smem[(ty + s) * bx + tx]);
    __syncthreads();
  }
  return smem[tx];
}

/// Reduces each output's block, or with grid.y > 1 this block's share of it into
/// partials[o * gridDim.y + blockIdx.y]. Outputs are visited in a grid-stride loop.
template <typename T, ReduceOp Op, bool kIndexed>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(Reducer<T, Op> red, Layout lay, const T* __restrict__ in,
                  typename Reducer<T, Op>::Out* __restrict__ out, typename Reducer<T, Op>::V* __restrict__ partials) {
  using V = typename Reducer<T, Op>::V;
  __shared__ V smem[kThreads];
  const int walkers = static_cast<int>(lay.row ? blockDim.x : blockDim.y);  // threads per output
  const int per_block = static_cast<int>(lay.row ? blockDim.y : blockDim.x);  // outputs per block
  const int own = static_cast<int>(lay.row ? threadIdx.y : threadIdx.x);
  const int walker = static_cast<int>(lay.row ? threadIdx.x : threadIdx.y);
  const int64_t lanes = static_cast<int64_t>(walkers) * gridDim.y;
  const int64_t lane = static_cast<int64_t>(blockIdx.y) * walkers + walker;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * per_block; first < lay.outputs;
       first += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t o = first + own;
    V acc = red.identity();
    if (o < lay.outputs) {
      V part[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) part[j] = red.identity();
      const T* base = in + offset_of(lay.kept, o, lay.outputs <= UINT32_MAX);
      if constexpr (kIndexed) {
        accumulate_strided<kUnroll>(red, part, base, IndexedOffset{lay.block, lay.length <= UINT32_MAX}, lay.length,
                                    lane, lanes);
      } else if (lay.vectorized) {
        accumulate_vectorized(red, part, base, lay.length, lane, lanes);
      } else {
        accumulate_strided<kStridedLoads>(
            red, part, base, LinearOffset{lay.block.ndim == 1 ? lay.block.strides[0][0] : 0}, lay.length, lane, lanes);
      }
      acc = red.combine(red.combine(part[0], part[1]), red.combine(part[2], part[3]));
    }
    acc = block_combine(red, acc, lay.row, smem);
    if (walker == 0 && o < lay.outputs) {
      if (partials != nullptr) partials[o * gridDim.y + blockIdx.y] = acc;
      else out[o] = red.finish(acc, lay.length);
    }
  }
}

/// Second pass of a split reduction: one warp per output combines its `splits` partials
/// (blockDim (32, 8)).
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(Reducer<T, Op> red, const typename Reducer<T, Op>::V* __restrict__ partials, int64_t splits,
                   int64_t outputs, int64_t length, typename Reducer<T, Op>::Out* __restrict__ out) {
  using V = typename Reducer<T, Op>::V;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; o < outputs;
       o += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    V acc = red.identity();
    for (int64_t s = threadIdx.x; s < splits; s += kWarpSize) acc = red.combine(acc, partials[o * splits + s]);
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) acc = red.combine(acc, lane_shuffle_xor(acc, offset));
    if (threadIdx.x == 0) out[o] = red.finish(acc, length);
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The smallest power of two >= n, for n up to kThreads (larger n give kThreads).
int pow2_at_least(int64_t n) {
  int p = 1;
  while (p < n && p < kThreads) p *= 2;
  return p;
}

/// Block shape, grid and split count of one launch.
struct Plan {
  int bx = 1, by = 1;
  int64_t blocks_x = 1;
  int64_t splits = 1;
};

/// Sizes the block to the block length and the output count, then splits blocks across
/// grid.y when the outputs alone would leave the GPU short of one full wave of `kernel`.
Plan make_plan(const Layout& lay, int vec, int device, const void* kernel) {
  const int64_t m = lay.outputs, n = lay.length;
  int sms = 0, threads_per_sm = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  // Elements one thread folds per unrolled iteration.
  const int64_t per_thread = lay.vectorized ? int64_t{kUnroll} * vec : lay.block.ndim > 1 ? kUnroll : kStridedLoads;
  Plan p;
  if (lay.row) {
    // Lanes per output: as many as fill the GPU together, but no more than give each lane
    // an iteration, and no fewer than keep each lane within ~kUnroll iterations.
    const int most = pow2_at_least(ceil_div(n, per_thread));
    const int fewest = std::min(most, pow2_at_least(ceil_div(n, per_thread * kUnroll)));
    p.bx = std::clamp(pow2_at_least(ceil_div(int64_t{sms} * threads_per_sm, m)), fewest, most);
    p.by = kThreads / p.bx;
    if (p.by > pow2_at_least(m)) {  // few outputs: give each more lanes, as far as it has work
      p.by = pow2_at_least(m);
      p.bx = std::min(kThreads / p.by, pow2_at_least(lay.vectorized ? ceil_div(n, vec) : n));
    }
  } else {
    p.bx = std::min(pow2_at_least(m), kWarpSize);
    p.by = std::min(pow2_at_least(ceil_div(n, per_thread)), kThreads / p.bx);
    if (p.bx * p.by < kThreads) p.bx = std::min(kThreads / p.by, pow2_at_least(m));  // short blocks: more outputs
  }
  if (p.bx * p.by < kWarpSize) (lay.row ? p.by : p.bx) = kWarpSize / (lay.row ? p.bx : p.by);  // whole warps
  const int64_t per_block = lay.row ? p.by : p.bx, walkers = lay.row ? p.bx : p.by;
  p.blocks_x = std::min<int64_t>(ceil_div(m, per_block), int64_t{1} << 20);

  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, p.bx * p.by, 0));
  const int64_t target = int64_t{sms} * std::max(1, per_sm);
  if (p.blocks_x < target) {
    // Keep >= kUnroll unrolled iterations per thread, so partials stay a small overhead.
    const int64_t by_work = ceil_div(n, walkers * per_thread * kUnroll);
    p.splits = std::clamp<int64_t>(std::min(ceil_div(target, p.blocks_x), by_work), 1, 65535);
  }
  return p;
}

/// Runs reduction Op (Sum with `mean` for Mean) for element type K.
template <typename K, ReduceOp Op>
void launch(const char* name, const Tensor& out, const Tensor& in, Layout lay, bool mean) {
  using T = device_t<K>;
  using R = Reducer<T, Op>;
  using V = typename R::V;
  using Out = typename R::Out;
  const DType want = std::is_same_v<Out, T> ? in.dtype() : DType::Int64;
  KILN_INTERNAL_ASSERT(out.dtype() == want, "{}: the CUDA kernel expects a {} output for a {} input, got {}", name,
                       want, in.dtype(), out.dtype());
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  lay.vectorized = lay.row && lay.block.ndim == 1 && lay.block.strides[0][0] == 1 && lay.length >= 2 * kVec;

  const int device = out.device().index();
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(out);
  const auto kernel = lay.block.ndim > 1 ? &reduce_kernel<T, Op, true> : &reduce_kernel<T, Op, false>;
  const Plan p = make_plan(lay, kVec, device, reinterpret_cast<const void*>(kernel));
  const R red{mean};
  const T* src = static_cast<const T*>(in.data_ptr());
  Out* dst = static_cast<Out*>(out.data_ptr());
  const dim3 block(static_cast<unsigned>(p.bx), static_cast<unsigned>(p.by));
  if (p.splits == 1) {
    kernel<<<dim3(static_cast<unsigned>(p.blocks_x)), block, 0, stream>>>(red, lay, src, dst, nullptr);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  // Partials from the caching allocator on this stream: freed when this returns, reused
  // only by work queued after these kernels on the same stream.
  const int64_t words = ceil_div(lay.outputs * p.splits * static_cast<int64_t>(sizeof(V)), 8);
  const Tensor scratch = new_contiguous({words}, DType::Float64, out.device(), name);
  V* partials = static_cast<V*>(scratch.data_ptr());
  kernel<<<dim3(static_cast<unsigned>(p.blocks_x), static_cast<unsigned>(p.splits)), block, 0, stream>>>(
      red, lay, src, dst, partials);
  CUDA_CHECK(cudaGetLastError());
  constexpr int kWarpsPerBlock = kThreads / kWarpSize;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(lay.outputs, kWarpsPerBlock), int64_t{1} << 20));
  combine_kernel<T, Op><<<blocks, dim3(kWarpSize, kWarpsPerBlock), 0, stream>>>(red, partials, p.splits, lay.outputs,
                                                                               lay.length, dst);
  CUDA_CHECK(cudaGetLastError());
}

/// Fills an Indexer from collapsed dims, failing (naming the op) past kMaxDims.
void fill_indexer(Indexer<1>& ix, const CollapsedDims<1>& dims, const char* name, const char* what) {
  KILN_CHECK(static_cast<int>(dims.sizes.size()) <= kMaxDims,
             "{}: the input's {} dims need {} dims after collapsing; the CUDA kernel indexes at most {} (call "
             "contiguous() on the input)",
             name, what, dims.sizes.size(), kMaxDims);
  ix.ndim = static_cast<int>(dims.sizes.size());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.sizes[d] = dims.sizes[static_cast<size_t>(d)];
    ix.strides[d][0] = dims.strides[static_cast<size_t>(d)][0];
  }
}

/// The ReduceKernel for CUDA tensors (contract in ops/kernels.h).
void reduce_cuda(ReduceOp op, const Tensor& out, const Tensor& in, int64_t reduced_dims) {
  const char* name = reduce_op_name(op);
  const int64_t kept = in.dim() - reduced_dims;
  KILN_INTERNAL_ASSERT(reduced_dims >= 0 && kept >= 0, "{}: cannot reduce {} trailing dims of a {}-dim input", name,
                       reduced_dims, in.dim());
  KILN_INTERNAL_ASSERT(out.is_contiguous() && out.device() == in.device(),
                       "{}: the CUDA kernel needs a contiguous output on the input's device", name);
  Layout lay;
  lay.outputs = out.numel();
  if (lay.outputs == 0) return;

  // Kept dims (out is contiguous, so only in's strides matter) and reduced dims, collapsed apart.
  DimValues kept_sizes, kept_strides, block_sizes, block_strides;
  for (size_t d = 0; d < static_cast<size_t>(kept); ++d) {
    kept_sizes.push_back(in.sizes()[d]);
    kept_strides.push_back(in.strides()[d]);
  }
  // Sum, mean, max and min do not depend on the order a block is visited in, so they walk it
  // in memory order (largest stride outermost, broadcast stride-0 dims outside all): a full
  // reduction of a transposed tensor then collapses into one contiguous run. Arg reductions
  // keep the row-major order their indices count in.
  std::vector<size_t> order;
  for (size_t d = static_cast<size_t>(kept); d < static_cast<size_t>(in.dim()); ++d) order.push_back(d);
  if (!is_arg(op)) {
    const auto key = [&](size_t d) { return in.strides()[d] == 0 ? INT64_MAX : std::abs(in.strides()[d]); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  }
  for (size_t d : order) {
    block_sizes.push_back(in.sizes()[d]);
    block_strides.push_back(in.strides()[d]);
  }
  const CollapsedDims<1> kept_dims = collapse_dims<1>(kept_sizes, {&kept_strides});
  const CollapsedDims<1> block_dims = collapse_dims<1>(block_sizes, {&block_strides});
  fill_indexer(lay.kept, kept_dims, name, "kept");
  lay.length = 1;
  for (int64_t s : block_sizes) lay.length *= s;
  if (lay.length > 0) fill_indexer(lay.block, block_dims, name, "reduced");  // else ndim 0 and nothing read
  lay.row = lay.block.ndim > 0 && lay.block.strides[lay.block.ndim - 1][0] == 1;

  dispatch_all(in.dtype(), name, [&]<typename K>() {
    switch (op) {
      case ReduceOp::Sum: return launch<K, ReduceOp::Sum>(name, out, in, lay, false);
      case ReduceOp::Mean:
        if constexpr (std::is_floating_point_v<acc_t<device_t<K>>>)
          return launch<K, ReduceOp::Sum>(name, out, in, lay, true);
        else break;
      case ReduceOp::Max: return launch<K, ReduceOp::Max>(name, out, in, lay, false);
      case ReduceOp::Min: return launch<K, ReduceOp::Min>(name, out, in, lay, false);
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin:
        // The op layer refuses bool argmax/argmin: no kernels for them.
        if constexpr (!std::is_same_v<K, bool>) {
          if (op == ReduceOp::ArgMax) return launch<K, ReduceOp::ArgMax>(name, out, in, lay, false);
          return launch<K, ReduceOp::ArgMin>(name, out, in, lay, false);
        } else {
          break;
        }
    }
    KILN_INTERNAL_ASSERT(false, "{} reached the CUDA kernel with dtype {}", name, in.dtype());
  });
}

}  // namespace

void register_reduce_kernels() { dispatch::reduce_kernels.set(DeviceType::CUDA, &reduce_cuda); }

}  // namespace kiln::cuda_kernels
