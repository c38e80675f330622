// CUDA kernels of fused_linear_gelu and its backward.
//
// Which path runs (the first below that takes the call; the kernel rows a profile shows under
// fused_linear_gelu):
//
//   either GELU, bfloat16 / float16, few rows (M up to skinny_gemm_max_m()): Kiln's skinny
//     GEMM (ops/cuda/skinny_gemm.h) when skinny_gemm_supported() takes the call (row-major x
//     and w with 16-byte aligned rows, K a multiple of 8): one kernel,
//     skinny_gemm_bias_gelu_kernel or skinny_gemm_bias_gelu_tanh_kernel, bias and GELU on the
//     way out, h stored only when asked for; it rounds as gelu(linear(...)) does, and a linear
//     of the same shape runs the same kernel (matmul_cuda.cu), so the two agree bit for bit;
//   exact GELU ("none"), bfloat16 / float16, and float32 while allow_tf32():
//     Kiln's own sm_90a kernel (ops/cuda/sm90_linear_gelu.h) when sm90_linear_gelu_supported()
//     takes the call (compute capability 9.0, row-major operands, the sizes and alignments
//     its TMA descriptors accept): one kernel, bias + GELU on the accumulator, h stored only
//     when asked for;
//   tanh GELU, bfloat16 / float16, and float32 while allow_tf32(), operands BLAS can read in
//     place: one cuBLASLt GEMM with the CUBLASLT_EPILOGUE_GELU_BIAS epilogue (GELU without a
//     bias), or GELU_AUX_BIAS / GELU_AUX writing h as the aux matrix when h is needed;
//     cuBLASLt wants the aux leading dimension (out_features) a multiple of 8, so an h of
//     another width takes the portable path. Not for true fp32: cuBLASLt does not document
//     its epilogue's tanh accuracy (CUTLASS's GELU epilogues use the hardware's approximate
//     tanh, ~2^-11 relative), which fits 16-bit and TF32 results but not the 1e-5 a float32
//     result is held to;
//   everything else (either GELU in true fp32, exact GELU where the sm_90a kernel declines,
//   float64, operands BLAS cannot read in place, K = 0, and whatever cuBLASLt declines) -- the
//   portable path:
//     the GEMM kernel (cuBLASLt with its BIAS epilogue, else its own fallbacks: gemm_kernels)
//     writes h = x w^T + b into the h buffer when h is needed, into the output otherwise,
//     then ONE elementwise kernel, fused_linear_gelu_epilogue_kernel, writes out = gelu(h)
//     (in place when there is no h buffer). Two kernel rows; for 16-bit exact GELU it runs
//     gelu_fast, so it rounds exactly as gelu(linear(...)) does.
//
// Backward: fused_linear_gelu_dgelu_kernel computes dH = grad * gelu'(h) (binary_math.h's
// GeluBackward / GeluTanhBackward, as gelu_backward) into a dense buffer; then grad input =
// dH @ W through the GEMM kernel; grad weight = dH^T @ X through cuBLASLt with the BGRADB
// epilogue, which also sums dH's rows into the bias gradient (float32 / float16 / bfloat16,
// where cuBLASLt offers it); otherwise the GEMM kernel and a column sum through the reduce
// kernel. Only the gradients asked for are computed.
//
// linear_dgelu_bgrad_cuda (fused_linear_gelu_cuda.h): the tanh-mode DGELU_BGRAD epilogue
// belongs to the GEMM that produces this op's incoming gradient (the next layer's grad-input
// GEMM), which is another op's; it is offered for a compiled training step to call.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "../core/cuda_check.h"
#include "../core/cuda_guard.h"
#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "binary_math.h"
#include "cuda/blas_layout.h"
#include "cuda/cublaslt.h"
#include "cuda/device_types.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/fused_linear_gelu_cuda.h"
#include "cuda/gelu_fast.cuh"
#include "cuda/register.h"
#include "cuda/skinny_gemm.h"
#include "cuda/sm90_linear_gelu.h"
#include "kernels.h"
#include "unary_math.h"

namespace kiln::cuda_kernels {

namespace {

constexpr const char* kForward = "fused_linear_gelu";
constexpr const char* kBackward = "fused_linear_gelu_backward";
constexpr int64_t kLtMax = std::numeric_limits<int32_t>::max();  // cuBLASLt's m, n, k are int32

// ---- the elementwise kernels ----------------------------------------------------------------

/// GELU of one element of T, computed in its accumulation type: the exact GELU of 16-bit
/// values is gelu_fast (as the unary gelu kernel), the rest unary_math.h's formulas.
template <typename T, bool kTanh>
struct GeluOf {
  __device__ __forceinline__ T operator()(T h) const {
    if constexpr (kTanh) return narrow<T>(math::GeluTanh{}(widen(h)));
    else if constexpr (is_half_v<T>) return narrow<T>(gelu_fast<T>(widen(h)));
    else return narrow<T>(math::Gelu{}(widen(h)));
  }
};

/// grad * gelu'(h) for one element, as gelu_backward computes it.
template <typename T, bool kTanh>
struct DGeluOf {
  __device__ __forceinline__ T operator()(T g, T h) const {
    if constexpr (kTanh) return narrow<T>(math::GeluTanhBackward{}(widen(g), widen(h)));
    else return narrow<T>(math::GeluBackward{}(widen(g), widen(h)));
  }
};

// out[i] = gelu(h[i]) over n contiguous elements (out may be h); VEC elements per access.
template <int VEC, typename T, typename F>
__global__ void fused_linear_gelu_epilogue_kernel(T* out, const T* h, int64_t n, F gelu) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * VEC;
  for (int64_t base = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC; base < n; base += stride) {
    if (base + VEC <= n) {
      Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(h + base);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v.v[j] = gelu(v.v[j]);
      *reinterpret_cast<Vec<T, VEC>*>(out + base) = v;
    } else {
      for (int64_t i = base; i < n; ++i) out[i] = gelu(h[i]);
    }
  }
}

// dh [rows, cols] (dense) = dgelu(grad, h) with grad and h strided 2-D; kDense: both dense too.
template <bool kDense, typename T, typename F>
__global__ void fused_linear_gelu_dgelu_kernel(T* dh, const T* grad, const T* h, int64_t rows, int64_t cols,
                                               int64_t g_rs, int64_t g_cs, int64_t h_rs, int64_t h_cs, F dgelu) {
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if constexpr (kDense) {
      dh[i] = dgelu(grad[i], h[i]);
    } else {
      const int64_t r = i / cols, c = i - r * cols;
      dh[i] = dgelu(grad[r * g_rs + c * g_cs], h[r * h_rs + c * h_cs]);
    }
  }
}

template <typename T, typename F>
void launch_epilogue(T* out, const T* h, int64_t n, F gelu, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
  if (kVec > 1 && aligned_for<T>(out, kVec) && aligned_for<T>(h, kVec)) {
    const unsigned int blocks = blocks_for((n + kVec - 1) / kVec);
    fused_linear_gelu_epilogue_kernel<kVec><<<blocks, kThreads, 0, stream>>>(out, h, n, gelu);
  } else {
    fused_linear_gelu_epilogue_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(out, h, n, gelu);
  }
  CUDA_CHECK(cudaGetLastError());
}

/// out = gelu(h), both contiguous of out's dtype (out may be h).
void gelu_epilogue(const Tensor& out, const Tensor& h, UnaryOp gelu, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), kForward, [&]<typename K>() {
    using T = device_t<K>;
    T* o = static_cast<T*>(out.data_ptr());
    const T* hp = static_cast<const T*>(h.data_ptr());
    if (gelu == UnaryOp::GeluTanh) launch_epilogue(o, hp, n, GeluOf<T, true>{}, stream);
    else launch_epilogue(o, hp, n, GeluOf<T, false>{}, stream);
  });
}

/// dh (dense [M, N]) = grad * gelu'(pre), grad and pre 2-D with any strides.
void dgelu(const Tensor& dh, const Tensor& grad, const Tensor& pre, UnaryOp gelu, cudaStream_t stream) {
  const int64_t rows = dh.sizes()[0], cols = dh.sizes()[1], n = rows * cols;
  if (n == 0) return;
  dispatch_floating(dh.dtype(), kBackward, [&]<typename K>() {
    using T = device_t<K>;
    T* d = static_cast<T*>(dh.data_ptr());
    const T* g = static_cast<const T*>(grad.data_ptr());
    const T* h = static_cast<const T*>(pre.data_ptr());
    const bool dense = grad.is_contiguous() && pre.is_contiguous();
    const int64_t gs0 = grad.strides()[0], gs1 = grad.strides()[1], hs0 = pre.strides()[0], hs1 = pre.strides()[1];
    auto launch = [&]<bool kTanh>() {
      const DGeluOf<T, kTanh> f{};
      if (dense)
        fused_linear_gelu_dgelu_kernel<true><<<blocks_for(n), kThreads, 0, stream>>>(d, g, h, rows, cols, gs0, gs1,
                                                                                      hs0, hs1, f);
      else
        fused_linear_gelu_dgelu_kernel<false><<<blocks_for(n), kThreads, 0, stream>>>(d, g, h, rows, cols, gs0, gs1,
                                                                                       hs0, hs1, f);
    };
    if (gelu == UnaryOp::GeluTanh) launch.template operator()<true>();
    else launch.template operator()<false>();
  });
  CUDA_CHECK(cudaGetLastError());
}

// ---- cuBLASLt -------------------------------------------------------------------------------

/// `t` [R, C] as its transpose [C, R], a view.
Tensor transposed(const Tensor& t) {
  return new_view(t, {t.sizes()[1], t.sizes()[0]}, {t.strides()[1], t.strides()[0]}, t.storage_offset());
}

MatrixLayout layout_of(const Tensor& t) { return {t.sizes()[0], t.sizes()[1], t.strides()[0], t.strides()[1]}; }

bool lt_epilogue_dtype(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
}

/// Where cuBLASLt's GELU epilogue is accurate enough (see the file comment).
bool lt_gelu_precision(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || (dtype == DType::Float32 && allow_tf32());
}

uint32_t alignment_of_ptr(const void* p) { return alignment_of(reinterpret_cast<uintptr_t>(p)); }

/// out [M, N] = epilogue(a [M, K] @ b [K, N]) through cuBLASLt (out^T = b^T a^T in its
/// column-major terms); false, launching nothing, when an operand is not BLAS-readable, a size
/// exceeds int32 or cuBLASLt declines. aux (when the epilogue has one) is [M, N] contiguous.
bool lt_run(const Tensor& out, const Tensor& a, const Tensor& b, cublasLtEpilogue_t epilogue, const void* bias,
            void* aux, void* bias_grad, cudaStream_t stream) {
  const int64_t M = out.sizes()[0], N = out.sizes()[1], K = a.sizes()[1];
  if (M > kLtMax || N > kLtMax || K > kLtMax || K == 0) return false;
  const BlasView va = blas_view(layout_of(a)), vb = blas_view(layout_of(b));
  if (!va.ok || !vb.ok) return false;
  const DType dtype = out.dtype();
  LtGemmDesc d;
  d.device = out.device().index();
  d.dtype = lt_type(dtype, kForward);
  d.compute = lt_compute(dtype);
  d.epilogue = epilogue;
  d.m = N;
  d.n = M;
  d.k = K;
  d.trans_a = vb.trans;
  d.lda = vb.ld;
  d.trans_b = va.trans;
  d.ldb = va.ld;
  d.ldc = N;
  d.align_a = alignment_of_ptr(b.data_ptr());
  d.align_b = alignment_of_ptr(a.data_ptr());
  d.align_c = alignment_of_ptr(out.data_ptr());
  if (lt_reads_bias(epilogue)) d.align_bias = alignment_of_ptr(bias);
  if (lt_writes_bias_grad(epilogue)) d.align_bias = alignment_of_ptr(bias_grad);
  if (lt_uses_aux(epilogue)) {
    d.aux_ld = N;
    d.align_aux = alignment_of_ptr(aux);
  }
  const float one = 1.0f, zero = 0.0f;
  LtGemmArgs args;
  args.a = b.data_ptr();
  args.b = a.data_ptr();
  args.c = out.data_ptr();
  args.bias = bias;
  args.aux = aux;
  args.bias_grad = bias_grad;
  args.alpha = &one;
  args.beta = &zero;
  return lt_matmul(d, args, stream);
}

// ---- the forward paths ----------------------------------------------------------------------

/// Row-major [R, K] with unit column stride and rows at least K apart (size-1 dims take any
/// stride: a single row is given the leading dimension K).
bool row_major(const Tensor& t, int64_t K) {
  return (K <= 1 || t.strides()[1] == 1) && (t.sizes()[0] <= 1 || t.strides()[0] >= K);
}

/// The leading dimension of a row-major [R, K] operand.
int64_t leading_dim(const Tensor& t, int64_t K) { return t.sizes()[0] == 1 ? K : t.strides()[0]; }

/// Fills the operand fields that Kiln's own kernels share (SkinnyGemmArgs, Sm90LinearGeluArgs:
/// sizes, row-major x and w with their leading dimensions, bias, dense out and pre); false
/// when x or w is not row-major or K is 0, which neither kernel takes.
template <typename Args>
bool fill_operands(Args& args, const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w,
                   const Tensor& bias) {
  const int64_t K = x.sizes()[1];
  if (K == 0 || !row_major(x, K) || !row_major(w, K)) return false;
  args.m = out.sizes()[0];
  args.n = out.sizes()[1];
  args.k = K;
  args.x = x.data_ptr();
  args.ldx = leading_dim(x, K);
  args.w = w.data_ptr();
  args.ldw = leading_dim(w, K);
  args.bias = bias.defined() ? bias.data_ptr() : nullptr;
  args.out = out.data_ptr();
  args.ldo = args.n;
  args.pre = pre.defined() ? pre.data_ptr() : nullptr;
  args.ldp = args.n;
  return true;
}

/// Kiln's skinny GEMM with a GELU epilogue, when it takes the call (16-bit, few rows).
bool try_skinny(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                UnaryOp gelu, cudaStream_t stream) {
  SkinnyGemmArgs args;
  switch (out.dtype()) {
    case DType::BFloat16: args.type = SkinnyType::BFloat16; break;
    case DType::Float16: args.type = SkinnyType::Float16; break;
    default: return false;
  }
  if (!fill_operands(args, out, pre, x, w, bias)) return false;
  args.epilogue = gelu == UnaryOp::GeluTanh ? SkinnyEpilogue::GeluTanh : SkinnyEpilogue::GeluExact;
  if (!skinny_gemm_supported(args)) return false;
  skinny_gemm(args, stream);
  return true;
}

/// Kiln's sm_90a kernel, when it takes the call (exact GELU).
bool try_sm90(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
              cudaStream_t stream) {
  Sm90LinearGeluArgs args;
  switch (out.dtype()) {
    case DType::BFloat16: args.type = Sm90GemmType::BFloat16; break;
    case DType::Float16: args.type = Sm90GemmType::Float16; break;
    case DType::Float32:
      if (!allow_tf32()) return false;  // true fp32 is asked for: the portable path's cuBLASLt GEMM
      args.type = Sm90GemmType::TF32;
      break;
    default: return false;
  }
  if (!fill_operands(args, out, pre, x, w, bias)) return false;
  if (!sm90_linear_gelu_supported(args)) return false;
  sm90_linear_gelu(args, stream);
  return true;
}

/// cuBLASLt's tanh-GELU epilogue, writing h as its aux matrix when h is needed.
bool try_lt_gelu(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                 cudaStream_t stream) {
  if (!lt_gelu_precision(out.dtype())) return false;
  const bool b = bias.defined(), h = pre.defined();
  const cublasLtEpilogue_t epilogue = h ? (b ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                                        : (b ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
  return lt_run(out, x, transposed(w), epilogue, b ? bias.data_ptr() : nullptr, h ? pre.data_ptr() : nullptr, nullptr,
                stream);
}

void fused_linear_gelu_cuda(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                            UnaryOp gelu) {
  KILN_INTERNAL_ASSERT(out.dim() == 2 && out.is_contiguous() && (!pre.defined() || pre.is_contiguous()) &&
                           (!bias.defined() || bias.is_contiguous()),
                       "fused_linear_gelu: the CUDA kernel wants contiguous out, pre and bias");
  if (out.numel() == 0) return;
  cuda::DeviceGuard guard(out.device().index());
  const cudaStream_t stream = stream_of(out);
  if (try_skinny(out, pre, x, w, bias, gelu, stream)) return;
  if (gelu == UnaryOp::Gelu && try_sm90(out, pre, x, w, bias, stream)) return;
  if (gelu == UnaryOp::GeluTanh && try_lt_gelu(out, pre, x, w, bias, stream)) return;
  // Portable: the GEMM (+ bias) into h, then one GELU kernel.
  const Tensor h = pre.defined() ? pre : out;
  dispatch::gemm_kernels.get(kForward, out.device())(h, x, transposed(w), 1.0, 0.0, bias);
  gelu_epilogue(out, h, gelu, stream);
}

// ---- the backward ---------------------------------------------------------------------------

void fused_linear_gelu_backward_cuda(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                     const Tensor& grad, const Tensor& pre, const Tensor& x, const Tensor& w,
                                     UnaryOp gelu) {
  cuda::DeviceGuard guard(grad.device().index());
  const cudaStream_t stream = stream_of(grad);
  const Tensor dh = new_contiguous(grad.sizes(), grad.dtype(), grad.device(), kBackward);
  dgelu(dh, grad, pre, gelu, stream);
  const GemmKernel gemm = dispatch::gemm_kernels.get(kBackward, grad.device());
  if (grad_input.defined() && grad_input.numel() > 0) gemm(grad_input, dh, w, 1.0, 0.0, Tensor());
  bool bias_done = !grad_bias.defined();
  if (grad_weight.defined() && grad_weight.numel() > 0) {
    // grad weight [N, K] = dH^T [N, M] @ X [M, K]; BGRADB sums op(B) = dH over M into the bias gradient.
    if (!bias_done && lt_epilogue_dtype(grad.dtype()) &&
        lt_run(grad_weight, transposed(dh), x, CUBLASLT_EPILOGUE_BGRADB, nullptr, nullptr, grad_bias.data_ptr(),
               stream)) {
      bias_done = true;
    } else {
      gemm(grad_weight, transposed(dh), x, 1.0, 0.0, Tensor());
    }
  }
  if (!bias_done) dispatch::reduce_kernels.get(kBackward, grad.device())(ReduceOp::Sum, grad_bias, transposed(dh), 1);
}

}  // namespace

bool linear_dgelu_bgrad_cuda(const Tensor& grad_pre, const Tensor& grad_bias, const Tensor& grad_next,
                             const Tensor& weight_next, const Tensor& pre) {
  const DType dtype = grad_pre.dtype();
  KILN_INTERNAL_ASSERT(grad_pre.dim() == 2 && grad_pre.is_contiguous() && pre.is_contiguous() &&
                           pre.sizes() == grad_pre.sizes() && grad_bias.is_contiguous() &&
                           grad_bias.numel() == grad_pre.sizes()[1] && grad_next.dim() == 2 &&
                           weight_next.dim() == 2 && grad_next.sizes()[0] == grad_pre.sizes()[0] &&
                           weight_next.sizes()[1] == grad_pre.sizes()[1] &&
                           grad_next.sizes()[1] == weight_next.sizes()[0],
                       "linear_dgelu_bgrad: wants grad_pre and pre [M, N] and grad_bias [N] contiguous, grad_next "
                       "[M, P] and weight_next [P, N]");
  KILN_INTERNAL_ASSERT(grad_bias.dtype() == dtype && grad_next.dtype() == dtype && weight_next.dtype() == dtype &&
                           pre.dtype() == dtype,
                       "linear_dgelu_bgrad: wants one dtype for every operand");
  if (!lt_epilogue_dtype(dtype) || grad_pre.numel() == 0) return false;
  cuda::DeviceGuard guard(grad_pre.device().index());
  // DGELU_BGRAD's bias gradient sums D's columns (Kiln's rows): length N, as grad_bias.
  return lt_run(grad_pre, grad_next, weight_next, CUBLASLT_EPILOGUE_DGELU_BGRAD, nullptr, pre.data_ptr(),
                grad_bias.data_ptr(), stream_of(grad_pre));
}

void register_fused_linear_gelu_kernels() {
  dispatch::fused_linear_gelu_kernels.set(DeviceType::CUDA, &fused_linear_gelu_cuda);
  dispatch::fused_linear_gelu_backward_kernels.set(DeviceType::CUDA, &fused_linear_gelu_backward_cuda);
}

}  // namespace kiln::cuda_kernels
