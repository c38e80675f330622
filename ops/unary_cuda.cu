// CUDA bodies of the unary ops: the formulas of unary_math.h, the same functors the CPU
// kernels call, computed in float for the 16-bit types.
// One deliberate, device-only exception, for speed: the exact GELU of float16/bfloat16
// (gelu_fast, in ops/cuda/gelu_fast.cuh, shared with the fused linear+GELU epilogues) evaluates
// erfc with a rational-exponential fit (degree 5 in t = 1/(1 + z/2): 7.6e-6 relative error,
// far below the 16-bit result's rounding, 2^-11 at best) in ~16 instructions where erff takes
// ~30 plus a branch. With erff the bfloat16 kernel was bound by arithmetic at 73% of copy
// bandwidth; with a fit in base 2 and the hardware's flush-to-zero reciprocal and exp2 it runs
// at ~88% (measured with the earlier degree-9 fit). Checked on an H200 over all 65536 inputs of
// each type against float64 (bench/sm90_linear_gelu_check.cu, `gelu`): none is more than one
// unit in the last place off; bfloat16: 1 result one unit off, 132 true values below 2^-126
// flushed or not correctly rounded; float16: 235 one unit off, 161 true values below 2^-14
// (subnormal results) not correctly rounded; worst relative error of the float result 2.0e-5,
// in the far left tail where the rounding of z^2 in the exponent dominates. (The degree-9 fit
// before it: 0 and 6 one unit off, worst 1.3e-5; it cost four more FMAs per element, which
// the fused kernel's in-register epilogue felt: docs/notes/sm90_linear_gelu.md.) It stays in a device
// header, not in unary_math.h: it is built on PTX instructions (approximate flush-to-zero exp2
// and reciprocal) that the host has no bit-identical counterpart for, so a host copy would be
// a different function anyway; the CPU keeps the exact erf formula, as PyTorch's CPU kernel
// does. float32 and float64 GELU run the shared exact formula here too.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/gelu_fast.cuh"
#include "cuda/register.h"
#include "kernels.h"
#include "unary_math.h"

namespace kiln::cuda_kernels {

namespace {

// gelu_fast as a formula functor.
struct GeluFast16 {
  __device__ __forceinline__ float operator()(float x) const { return gelu_fast(x); }
};

// The formula the kernel for element type T runs: F, except the 16-bit GELU fast path.
template <typename T, typename F>
using DeviceFormula = std::conditional_t<is_half_v<T> && std::is_same_v<F, math::Gelu>, GeluFast16, F>;

template <typename T, typename F>
struct UnaryFn {
  F formula;
  __device__ T operator()(T v) const { return narrow<T>(formula(widen(v))); }
};

template <typename K>
void unary_typed(UnaryOp op, const Tensor& out, const Tensor& in) {
  using T = device_t<K>;
  const bool done = math::with_unary_formula<acc_t<T>>(op, [&]<typename F>(F) {
    map<K, K>("unary", out, UnaryFn<T, DeviceFormula<T, F>>{}, in);
  });
  KILN_INTERNAL_ASSERT(done, "unary op {} reached the CUDA kernel with dtype {}", static_cast<int>(op), out.dtype());
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch_numeric(out.dtype(), "unary", [&]<typename K>() { unary_typed<K>(op, out, in); });
}

}  // namespace

void register_unary_kernels() { dispatch::unary_kernels.set(DeviceType::CUDA, &unary_cuda); }

}  // namespace kiln::cuda_kernels
