// The CUDA GEMM kernel (GemmKernel in kernels.h): floating dtypes through cuBLASLt (16-bit
// linears with few rows through Kiln's skinny GEMM, below), integers (and anything cuBLASLt
// declines) through an own shared-memory tiled kernel.
//
// Layout mapping (the helpers are in ops/cuda/blas_layout.h). Kiln matrices are row-major;
// cuBLASLt is column-major. We compute out^T [N, M] = b^T a^T, so cuBLASLt's A is Kiln's b and
// its B is Kiln's a. A matrix whose column stride is 1 is, read column-major, its own
// transpose with ld = row stride (op N); a matrix whose row stride is 1 is column-major as it
// stands with ld = column stride (op T). Size-1 dims have arbitrary strides and are
// normalised first. Any other matrix layout
// (both strides non-unit, stride 0 inside a matrix, ld too small) is copied densely first,
// only its distinct matrices (stride-0 batch dims stay broadcast).
//
// Batches. The batch dims of out, a and b are collapsed together (ops/collapse.h); the
// innermost collapsed dim becomes cuBLASLt's strided batch, any outer ones a host loop of
// calls that share one plan. When b is broadcast over the innermost batch dim and a's rows
// continue from one batch entry to the next (x [B, M, K] @ w [K, N]), the batch is folded
// into M: one [B*M, K] @ [K, N] GEMM instead of B small ones.
//
// Skinny linears: a bfloat16 / float16 linear with few rows (after folding the batch: out [M, N]
// = a [M, K] row-major @ b, b the transpose of a contiguous-rowed w [N, K], alpha 1, beta 0 or a
// bias vector) runs Kiln's own skinny GEMM (ops/cuda/skinny_gemm.h) instead of cuBLASLt when
// skinny_gemm_supported() takes it (M up to skinny_gemm_max_m(), aligned rows, K a multiple
// of 8): one kernel that reads w once, where cuBLASLt runs a split-K GEMM and a reduce kernel.
//
// Precision: float32 in true fp32 (CUBLAS_COMPUTE_32F) unless allow_tf32(); float16 and
// bfloat16 accumulate in float; float64 in CUBLAS_COMPUTE_64F. A bias vector rides in the
// CUBLASLT_EPILOGUE_BIAS epilogue (beta 0); where cuBLASLt has no such algorithm, the bias
// is copied into out and added as beta = 1.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../core/cuda_guard.h"
#include "../tensor/convert.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "cuda/blas_layout.h"
#include "cuda/cublaslt.h"
#include "cuda/device_types.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "cuda/skinny_gemm.h"
#include "kernels.h"
#include "matmul.h"

namespace kiln::cuda_kernels {

namespace {

// ---- describing the problem --------------------------------------------------------------

/// Batch dims after collapsing: `outer` walked by the host, the innermost as a strided batch.
/// Strides in elements, per operand in the order out, a, b.
struct Batches {
  DimValues outer_sizes;
  SmallVector<std::array<int64_t, 3>, kInlineDims> outer_strides;
  int64_t count = 1;
  std::array<int64_t, 3> stride{0, 0, 0};

  int64_t outer_count() const {
    int64_t n = 1;
    for (int64_t s : outer_sizes) n *= s;
    return n;
  }
  /// Element offsets of out, a and b for host-loop iteration i.
  std::array<int64_t, 3> outer_offsets(int64_t i) const {
    std::array<int64_t, 3> off{0, 0, 0};
    for (size_t d = outer_sizes.size(); d-- > 0;) {
      const int64_t idx = i % outer_sizes[d];
      i /= outer_sizes[d];
      for (size_t k = 0; k < 3; ++k) off[k] += idx * outer_strides[d][k];
    }
    return off;
  }
  /// Every byte offset operand k is reached through, OR-ed (for alignment_of).
  uint64_t offset_bits(size_t k, size_t elem) const {
    uint64_t bits = count > 1 ? static_cast<uint64_t>(stride[k]) * elem : 0;
    for (const auto& s : outer_strides) bits |= static_cast<uint64_t>(s[k]) * elem;
    return bits;
  }
};

/// out [batches, M, N] (dense rows of N) = a [batches, M, K] @ b [batches, K, N].
struct Problem {
  char* out = nullptr;
  const char* a = nullptr;
  const char* b = nullptr;
  size_t elem = 0;
  int64_t M = 0, N = 0, K = 0;
  MatrixLayout ma{}, mb{};
  Batches batches;
};

/// The problem of out = a @ b; `for_lt` shapes it for cuBLASLt (folds a broadcast weight's
/// batch into M), otherwise it is for the tiled kernel, which takes anything.
Problem describe(const Tensor& out, const Tensor& a, const Tensor& b, bool for_lt) {
  const size_t nb = static_cast<size_t>(out.dim() - 2);
  Problem p;
  p.out = static_cast<char*>(out.data_ptr());
  p.a = static_cast<const char*>(a.data_ptr());
  p.b = static_cast<const char*>(b.data_ptr());
  p.elem = out.element_size();
  p.M = out.sizes()[nb];
  p.N = out.sizes()[nb + 1];
  p.K = a.sizes()[nb + 1];
  p.ma = {p.M, p.K, a.strides()[nb], a.strides()[nb + 1]};
  p.mb = {p.K, p.N, b.strides()[nb], b.strides()[nb + 1]};

  DimValues sizes, so, sa, sb;
  for (size_t d = 0; d < nb; ++d) {
    sizes.push_back(out.sizes()[d]);
    so.push_back(out.strides()[d]);
    sa.push_back(a.strides()[d]);
    sb.push_back(b.strides()[d]);
  }
  const CollapsedDims<3> dims = collapse_dims<3>(sizes, {&so, &sa, &sb});
  size_t nd = dims.sizes.size();
  if (for_lt && nd > 0) {
    // b shared by every entry of the innermost batch dim, a's rows continuing across it:
    // the batch is more rows of one GEMM (out is dense, so its rows continue too).
    const std::array<int64_t, 3>& st = dims.strides[nd - 1];
    const int64_t size = dims.sizes[nd - 1];
    const bool fits = p.M * size <= std::numeric_limits<int32_t>::max();  // cuBLASLt's m, n, k are int32
    if (fits && st[2] == 0 && st[1] != 0 && (p.M == 1 || st[1] == p.M * p.ma.row_stride)) {
      const MatrixLayout folded{p.M * size, p.K, p.M == 1 ? st[1] : p.ma.row_stride, p.ma.col_stride};
      if (blas_view(folded).ok) {
        p.ma = folded;
        p.M = folded.rows;
        --nd;
      }
    }
  }
  if (nd > 0) {
    // The innermost batch dim is cuBLASLt's strided batch; a zero batch stride of a or b is
    // a broadcast, which cuBLASLt takes as it is (tests/cuda/test_gemm.cpp covers it).
    p.batches.count = dims.sizes[nd - 1];
    p.batches.stride = dims.strides[nd - 1];
    --nd;
  }
  for (size_t d = 0; d < nd; ++d) {
    p.batches.outer_sizes.push_back(dims.sizes[d]);
    p.batches.outer_strides.push_back(dims.strides[d]);
  }
  return p;
}

/// A dense copy of `t`'s distinct matrices (batch dims of stride 0 stay broadcast).
Tensor materialize(const Tensor& t) {
  Shape compact = t.sizes();
  for (int64_t d = 0; d + 2 < t.dim(); ++d)
    if (t.strides()[static_cast<size_t>(d)] == 0) compact[static_cast<size_t>(d)] = 1;
  const Tensor src = new_view(t, compact, t.strides(), t.storage_offset());
  Tensor dense = new_contiguous(compact, t.dtype(), t.device(), "matmul");
  dispatch::copy_kernels.get("matmul", t.device())(dense, src);
  return broadcast_view(dense, t.sizes());
}

// ---- cuBLASLt ------------------------------------------------------------------------------

/// Runs the problem through cuBLASLt; false (nothing launched) when it has no algorithm or
/// the sizes exceed what it takes.
bool lt_gemm(const Problem& p, DType dtype, int device, double alpha, double beta, const void* bias,
             cudaStream_t stream) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (p.M > kMax || p.N > kMax || p.K > kMax || p.batches.count > kMax) return false;
  const BlasView va = blas_view(p.ma), vb = blas_view(p.mb);
  KILN_INTERNAL_ASSERT(va.ok && vb.ok, "matmul: operand layouts must be BLAS-compatible here");

  LtGemmDesc d;
  d.device = device;
  d.dtype = lt_type(dtype, "matmul");
  d.compute = lt_compute(dtype);
  d.epilogue = bias != nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  // D = out^T [N, M]; A = b^T [N, K]; B = a^T [K, M].
  d.m = p.N;
  d.n = p.M;
  d.k = p.K;
  d.trans_a = vb.trans;
  d.lda = vb.ld;
  d.trans_b = va.trans;
  d.ldb = va.ld;
  d.ldc = p.N;
  const Batches& bt = p.batches;
  if (bt.count > 1) {
    d.batch = bt.count;
    d.stride_a = bt.stride[2];
    d.stride_b = bt.stride[1];
    d.stride_c = bt.stride[0];
  }
  d.align_a = alignment_of(reinterpret_cast<uintptr_t>(p.b) | bt.offset_bits(2, p.elem));
  d.align_b = alignment_of(reinterpret_cast<uintptr_t>(p.a) | bt.offset_bits(1, p.elem));
  d.align_c = alignment_of(reinterpret_cast<uintptr_t>(p.out) | bt.offset_bits(0, p.elem));
  d.align_bias = bias != nullptr ? alignment_of(reinterpret_cast<uintptr_t>(bias)) : 0;

  // Scalars in the scale type: double for float64, float otherwise.
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const bool wide = d.compute == CUBLAS_COMPUTE_64F;
  LtGemmArgs args;
  args.alpha = wide ? static_cast<const void*>(&alpha) : &alpha_f;
  args.beta = wide ? static_cast<const void*>(&beta) : &beta_f;
  args.bias = bias;
  const int64_t outer = bt.outer_count();
  for (int64_t i = 0; i < outer; ++i) {
    const std::array<int64_t, 3> off = bt.outer_offsets(i);
    args.c = p.out + off[0] * static_cast<int64_t>(p.elem);
    args.b = p.a + off[1] * static_cast<int64_t>(p.elem);
    args.a = p.b + off[2] * static_cast<int64_t>(p.elem);
    if (!lt_matmul(d, args, stream)) {
      // Every iteration shares the description, so only the first can find no algorithm.
      KILN_INTERNAL_ASSERT(i == 0, "matmul: cuBLASLt plan vanished mid-batch");
      return false;
    }
  }
  return true;
}

// ---- the skinny GEMM -------------------------------------------------------------------------

/// Runs the problem through the skinny GEMM when it is a 16-bit linear the kernel takes (one
/// matrix, a row-major, b = w^T with w's rows contiguous, alpha 1 and beta 0 or a bias); false,
/// launching nothing, otherwise.
bool try_skinny(const Problem& p, DType dtype, double alpha, double beta, const void* bias, cudaStream_t stream) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16) return false;
  if (alpha != 1.0 || (bias == nullptr && beta != 0.0)) return false;  // a bias replaces the beta term
  if (p.batches.count != 1 || !p.batches.outer_sizes.empty()) return false;
  // a [M, K]: unit column stride (a single row takes any stride; K == 1 any column stride).
  if (p.K > 1 && p.ma.col_stride != 1) return false;
  // b [K, N] = w^T: unit row stride, w's row stride is b's column stride.
  if (p.K > 1 && p.mb.row_stride != 1) return false;
  SkinnyGemmArgs args;
  args.type = dtype == DType::BFloat16 ? SkinnyType::BFloat16 : SkinnyType::Float16;
  args.epilogue = SkinnyEpilogue::Bias;
  args.m = p.M;
  args.n = p.N;
  args.k = p.K;
  args.x = p.a;
  args.ldx = p.M == 1 ? p.K : p.ma.row_stride;
  args.w = p.b;
  args.ldw = p.N == 1 ? p.K : p.mb.col_stride;
  args.bias = bias;
  args.out = p.out;
  args.ldo = p.N;
  if (!skinny_gemm_supported(args)) return false;
  skinny_gemm(args, stream);
  return true;
}

// ---- the tiled kernel: integers, K == 0, and whatever cuBLASLt declines ----------------

constexpr int kTile = 16;

/// Arithmetic type of the tiled kernel: float / double as usual; integers wrap in uint64
/// (two's complement), which matches the CPU's int64 loop bit for bit after narrowing.
template <typename T>
using tiled_acc_t = std::conditional_t<std::is_integral_v<T>, uint64_t, acc_t<T>>;

template <typename Acc, typename T>
__device__ __forceinline__ Acc load_as(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<Acc>(static_cast<int64_t>(v));
  else return static_cast<Acc>(widen(v));
}

template <typename T, typename Acc>
__device__ __forceinline__ T store_as(Acc v) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<int64_t>(v));
  else return narrow<T>(v);
}

template <typename T, typename Acc>
struct TiledArgs {
  T* out;
  const T* a;
  const T* b;
  const T* bias;  // nullptr: the beta term instead
  int64_t M, N, K;
  int64_t sa0, sa1, sb0, sb1;
  int64_t batch, bs_out, bs_a, bs_b;
  Acc alpha, beta;
};

// One thread per output element, kTile x kTile blocks staging a and b through shared
// memory; y and z (rows, batch) loop so any size fits the grid limits.
template <typename T, typename Acc>
__global__ void gemm_tiled_kernel(TiledArgs<T, Acc> p) {
  __shared__ Acc tile_a[kTile][kTile + 1];
  __shared__ Acc tile_b[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const T* a = p.a + z * p.bs_a;
    const T* b = p.b + z * p.bs_b;
    T* out = p.out + z * p.bs_out;
    for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile; row0 < p.M;
         row0 += static_cast<int64_t>(gridDim.y) * kTile) {
      const int64_t row = row0 + ty;
      Acc acc = Acc(0);
      for (int64_t k0 = 0; k0 < p.K; k0 += kTile) {
        tile_a[ty][tx] = row < p.M && k0 + tx < p.K ? load_as<Acc>(a[row * p.sa0 + (k0 + tx) * p.sa1]) : Acc(0);
        tile_b[ty][tx] = k0 + ty < p.K && col < p.N ? load_as<Acc>(b[(k0 + ty) * p.sb0 + col * p.sb1]) : Acc(0);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) acc += tile_a[ty][kk] * tile_b[kk][tx];
        __syncthreads();
      }
      if (row < p.M && col < p.N) {
        T& o = out[row * p.N + col];
        Acc v = p.K > 0 ? p.alpha * acc : Acc(0);  // K == 0: an empty sum, whatever alpha is
        if (p.bias != nullptr) v += load_as<Acc>(p.bias[col]);
        else if (p.beta != Acc(0)) v += p.beta * load_as<Acc>(o);  // beta == 0 never reads out
        o = store_as<T>(v);
      }
    }
  }
}

void tiled_gemm(const Problem& p, DType dtype, double alpha, double beta, const void* bias, cudaStream_t stream) {
  const int64_t grid_x = (p.N + kTile - 1) / kTile;
  KILN_CHECK(grid_x <= std::numeric_limits<int32_t>::max(), "matmul: N = {} is too large for the CUDA kernel", p.N);
  const int64_t grid_y = std::min<int64_t>((p.M + kTile - 1) / kTile, 65535);
  const int64_t grid_z = std::min<int64_t>(p.batches.count, 65535);
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), static_cast<unsigned>(grid_z));
  const dim3 block(kTile, kTile);
  dispatch_numeric(dtype, "matmul", [&]<typename KT>() {
    using T = device_t<KT>;
    using Acc = tiled_acc_t<T>;
    TiledArgs<T, Acc> args{};
    args.bias = static_cast<const T*>(bias);
    args.M = p.M;
    args.N = p.N;
    args.K = p.K;
    args.sa0 = p.ma.row_stride;
    args.sa1 = p.ma.col_stride;
    args.sb0 = p.mb.row_stride;
    args.sb1 = p.mb.col_stride;
    args.batch = p.batches.count;
    args.bs_out = p.batches.stride[0];
    args.bs_a = p.batches.stride[1];
    args.bs_b = p.batches.stride[2];
    if constexpr (std::is_integral_v<T>) {
      // convert: defined for any double (a cast past int64's range is not), as on the CPU.
      args.alpha = static_cast<Acc>(kiln::convert<int64_t>(alpha));
      args.beta = static_cast<Acc>(kiln::convert<int64_t>(beta));
    } else {
      args.alpha = static_cast<Acc>(alpha);
      args.beta = static_cast<Acc>(beta);
    }
    const int64_t outer = p.batches.outer_count();
    for (int64_t i = 0; i < outer; ++i) {
      const std::array<int64_t, 3> off = p.batches.outer_offsets(i);
      args.out = reinterpret_cast<T*>(p.out) + off[0];
      args.a = reinterpret_cast<const T*>(p.a) + off[1];
      args.b = reinterpret_cast<const T*>(p.b) + off[2];
      gemm_tiled_kernel<T, Acc><<<grid, block, 0, stream>>>(args);
      CUDA_CHECK(cudaGetLastError());
    }
  });
}

// ---- the kernel ----------------------------------------------------------------------------

/// The floating path with K > 0: cuBLASLt, falling back as the file comment says.
void gemm_floating(const Tensor& out, const Tensor& a_in, const Tensor& b_in, double alpha, double beta,
                   const Tensor& bias, cudaStream_t stream) {
  const size_t nb = static_cast<size_t>(out.dim() - 2);
  auto blas_ok = [nb](const Tensor& t) {
    return blas_view({t.sizes()[nb], t.sizes()[nb + 1], t.strides()[nb], t.strides()[nb + 1]}).ok;
  };
  const Tensor a = blas_ok(a_in) ? a_in : materialize(a_in);
  const Tensor b = blas_ok(b_in) ? b_in : materialize(b_in);
  const Problem p = describe(out, a, b, /*for_lt=*/true);
  const DType dtype = out.dtype();
  const int device = out.device().index();
  if (try_skinny(p, dtype, alpha, beta, bias.defined() ? bias.data_ptr() : nullptr, stream)) return;
  if (bias.defined()) {
    if (lt_gemm(p, dtype, device, alpha, 0.0, bias.data_ptr(), stream)) return;
    // No bias epilogue for this case: the bias becomes the beta = 1 term.
    dispatch::copy_kernels.get("matmul", out.device())(out, broadcast_view(bias, out.sizes()));
    beta = 1.0;
  }
  if (lt_gemm(p, dtype, device, alpha, beta, nullptr, stream)) return;
  tiled_gemm(p, dtype, alpha, beta, nullptr, stream);
}

void gemm_cuda(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& bias) {
  KILN_INTERNAL_ASSERT(out.dim() >= 2 && a.dim() == out.dim() && b.dim() == out.dim() && out.is_contiguous(),
                       "matmul: the CUDA GEMM wants out [..., M, N] contiguous and a, b of the same rank");
  KILN_INTERNAL_ASSERT(a.device() == out.device() && b.device() == out.device(),
                       "matmul: operands on different devices reached the CUDA GEMM");
  KILN_INTERNAL_ASSERT(!bias.defined() || (bias.dim() == 1 && bias.sizes()[0] == out.sizes().back() &&
                                           bias.is_contiguous() && bias.dtype() == out.dtype() &&
                                           bias.device() == out.device()),
                       "matmul: the bias must be a contiguous [N] vector of out's dtype on out's device");
  if (out.numel() == 0) return;  // M, N or a batch dim is 0
  cuda::DeviceGuard guard(out.device().index());
  const cudaStream_t stream = stream_of(out);
  if (is_floating(out.dtype()) && a.sizes().back() > 0) {
    gemm_floating(out, a, b, alpha, beta, bias, stream);
    return;
  }
  // Integers, and K == 0 (out = beta * out, or the bias) for every dtype.
  tiled_gemm(describe(out, a, b, /*for_lt=*/false), out.dtype(), alpha, beta, bias.defined() ? bias.data_ptr() : nullptr,
             stream);
}

}  // namespace

void register_matmul_kernels() { dispatch::gemm_kernels.set(DeviceType::CUDA, &gemm_cuda); }

}  // namespace kiln::cuda_kernels
