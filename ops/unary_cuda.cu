// CUDA bodies of the unary ops: the formulas of unary_math.h, the same functors the CPU
// kernels call, computed in float for the 16-bit types.
// One deliberate, device-only exception, for speed: the exact GELU of float16/bfloat16
// (gelu_fast, in ops/cuda/gelu_fast.cuh, shared with the fused linear+GELU epilogues) evaluates
// erfc with a fit where erff takes ~30 instructions plus a branch: log2(erfc(z) / 2) as one
// Laurent polynomial in d = 1 + p z (v13 of docs/notes/sm90_linear_gelu.md), per type as short
// as the 16-bit result's rounding allows (bfloat16: nine instructions, 7.0e-4 relative error
// against its 2^-8 unit; float16: ten, 1.0e-5 against 2^-11), on the hardware's flush-to-zero
// reciprocal and exp2, in base 2. With erff the bfloat16 kernel was bound by arithmetic at 73%
// of copy bandwidth; the degree-9 fit took it to 88%, the twelve-instruction one to 98%
// (BENCHMARKS.md 4 and 8). Checked on an H200 over all 65536 inputs of each type against
// float64 (bench/sm90_linear_gelu_check.cu, `gelu`, and tests/cuda/test_cuda_basics.cpp): none
// is more than one unit in the last place off; bfloat16: 250 results one unit off, 134 true
// values below 2^-126 flushed or not correctly rounded, and three inputs in [-13.125, -13]
// whose true results (below 2^-123) flush to -0 (float32's erf formula, the CPU's and
// PyTorch's, gives 0 from x = -5.5 down); float16: 313 one unit off, 2 true values below 2^-14
// (subnormal results) not correctly rounded. (v9's eleven-instruction fit: 462 and 1605 one unit
// off; each instruction fewer is time the fused kernel's epilogue saves: the notes' v8 and v13.)
// It stays in a device header, not in unary_math.h: it is
// built on PTX instructions (approximate flush-to-zero exp2 and reciprocal) that the host has
// no bit-identical counterpart for, so a host copy would be
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

// gelu_fast as a formula functor, with the fit for T.
template <typename T>
struct GeluFast16 {
  __device__ __forceinline__ float operator()(float x) const { return gelu_fast<T>(x); }
};

// The formula the kernel for element type T runs: F, except the 16-bit GELU fast path.
template <typename T, typename F>
using DeviceFormula = std::conditional_t<is_half_v<T> && std::is_same_v<F, math::Gelu>, GeluFast16<T>, F>;

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
