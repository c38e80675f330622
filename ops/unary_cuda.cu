// CUDA bodies of the unary ops, the same formulas as unary_cpu.cpp computed in float for
// the 16-bit types (exact-erf GELU, and its tanh form with sqrt(2/pi) and 0.044715).
// One exception, for speed: the exact GELU of float16/bfloat16 evaluates erfc with a
// Chebyshev fit whose relative error is below 1.2e-7 everywhere (~20 instructions instead
// of erff's ~30 plus a branch), far below the 16-bit result's rounding (2^-11 at best); with
// erff the bfloat16 kernel was bound by arithmetic at 73% of copy bandwidth.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

// Phi(x) = P(N(0,1) <= x) through erfc(|x| / sqrt(2)) (Numerical Recipes' erfcc fit, relative
// error < 1.2e-7 for every argument, so the left tail keeps its relative accuracy).
__device__ __forceinline__ float normal_cdf_fast(float x) {
  const float z = fabsf(x) * 0.70710678118654752440f;
  const float t = __fdividef(1.0f, fmaf(0.5f, z, 1.0f));  // MUFU reciprocal, ~1 ulp
  float p = 0.17087277f;
  p = fmaf(t, p, -0.82215223f);
  p = fmaf(t, p, 1.48851587f);
  p = fmaf(t, p, -1.13520398f);
  p = fmaf(t, p, 0.27886807f);
  p = fmaf(t, p, -0.18628806f);
  p = fmaf(t, p, 0.09678418f);
  p = fmaf(t, p, 0.37409196f);
  p = fmaf(t, p, 1.00002368f);
  p = fmaf(t, p, -1.26551223f);
  const float half_erfc = 0.5f * t * __expf(fmaf(-z, z, p));
  return x >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

template <typename T, UnaryOp Op>
struct UnaryFn {
  __device__ T operator()(T v) const {
    using A = acc_t<T>;
    const A x = widen(v);
    if constexpr (Op == UnaryOp::Neg) return narrow<T>(static_cast<A>(-x));
    else if constexpr (Op == UnaryOp::Abs) return narrow<T>(x < A(0) ? static_cast<A>(-x) : x);
    else if constexpr (Op == UnaryOp::Relu) return narrow<T>(x < A(0) ? A(0) : x);  // NaN stays NaN
    else if constexpr (Op == UnaryOp::Exp) return narrow<T>(exp(x));
    else if constexpr (Op == UnaryOp::Log) return narrow<T>(log(x));
    else if constexpr (Op == UnaryOp::Sqrt) return narrow<T>(sqrt(x));
    else if constexpr (Op == UnaryOp::Rsqrt) return narrow<T>(A(1) / sqrt(x));
    else if constexpr (Op == UnaryOp::Tanh) return narrow<T>(tanh(x));
    else if constexpr (Op == UnaryOp::Sigmoid) return narrow<T>(A(1) / (A(1) + exp(-x)));
    else if constexpr (Op == UnaryOp::Silu) return narrow<T>(x / (A(1) + exp(-x)));
    else if constexpr (Op == UnaryOp::Gelu && is_half_v<T>) return narrow<T>(x * normal_cdf_fast(x));
    else if constexpr (Op == UnaryOp::Gelu) return narrow<T>(A(0.5) * x * (A(1) + erf(x * A(0.70710678118654752440))));
    else return narrow<T>(A(0.5) * x * (A(1) + tanh(A(0.79788456080286535588) * (x + A(0.044715) * x * x * x))));
  }
};

template <typename K, UnaryOp Op>
void run(const Tensor& out, const Tensor& in) {
  map<K, K>("unary", out, UnaryFn<device_t<K>, Op>{}, in);
}

template <typename K>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
  switch (op) {
    case UnaryOp::Neg: return run<K, UnaryOp::Neg>(out, in);
    case UnaryOp::Abs: return run<K, UnaryOp::Abs>(out, in);
    case UnaryOp::Relu: return run<K, UnaryOp::Relu>(out, in);
    default: break;
  }
  if constexpr (!std::is_integral_v<K>) {
    switch (op) {
      case UnaryOp::Exp: return run<K, UnaryOp::Exp>(out, in);
      case UnaryOp::Log: return run<K, UnaryOp::Log>(out, in);
      case UnaryOp::Sqrt: return run<K, UnaryOp::Sqrt>(out, in);
      case UnaryOp::Rsqrt: return run<K, UnaryOp::Rsqrt>(out, in);
      case UnaryOp::Tanh: return run<K, UnaryOp::Tanh>(out, in);
      case UnaryOp::Sigmoid: return run<K, UnaryOp::Sigmoid>(out, in);
      case UnaryOp::Silu: return run<K, UnaryOp::Silu>(out, in);
      case UnaryOp::Gelu: return run<K, UnaryOp::Gelu>(out, in);
      case UnaryOp::GeluTanh: return run<K, UnaryOp::GeluTanh>(out, in);
      default: break;
    }
  }
  KILN_INTERNAL_ASSERT(false, "unary op {} reached the CUDA kernel with dtype {}", static_cast<int>(op), out.dtype());
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), "unary", [&]<typename K>() { unary_typed<K>(op, out, in); });
}

}  // namespace

void register_unary_kernels() { dispatch::unary_kernels.set(DeviceType::CUDA, &unary_cuda); }

}  // namespace kiln::cuda_kernels
