// The online softmax statistic shared by the softmax and cross_entropy kernels: a running
// (max, sum of exp(x - max)) pair that one pass over a row builds, merged across threads,
// with the CPU's semantics for NaN and infinities (ops/softmax_cpu.cpp): the max ignores
// NaN, an all -inf row uses max 0, and a +inf or NaN element makes the sum NaN.
#pragma once

#include <cuda_runtime.h>

#include <limits>

#include "row_cache.cuh"

namespace kiln::cuda_kernels {

/// A running (max, sum of exp(x - max)) pair: the online softmax statistic.
template <typename A>
struct MaxSum {
  A m, s;
  __device__ __forceinline__ static MaxSum shfl_xor(MaxSum v, int offset) {
    return {__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
  }
};

/// Adds x to a running pair with the CPU's semantics: -inf adds 0, NaN poisons the sum, a
/// larger x rescales the sum (+inf is settled by finish_max_sum).
template <typename A>
__device__ __forceinline__ void online_update(MaxSum<A>& st, A x) {
  if (x > st.m) {
    st.s = st.s * acc_exp(st.m - x) + A(1);  // m == -inf: s * 0 + 1 (NaN stays NaN)
    st.m = x;
  } else if (x != -std::numeric_limits<A>::infinity()) {
    st.s += acc_exp(x - st.m);  // NaN x or NaN s: NaN
  }
}

/// Merges two running pairs (commutative, so all lanes of a butterfly agree).
template <typename A>
struct MergeMaxSum {
  __device__ __forceinline__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    const A m = fmax(a.m, b.m);
    // An equal max needs no rescaling (and must not compute exp(-inf - -inf)).
    const A sa = a.m == m ? a.s : a.s * acc_exp(a.m - m);
    const A sb = b.m == m ? b.s : b.s * acc_exp(b.m - m);
    return {m, sa + sb};
  }
};

/// The CPU's final (max, sum): a +inf max makes the sum NaN (exp(inf - inf) on the CPU),
/// an all -inf (or NaN) row uses max 0.
template <typename A>
__device__ __forceinline__ void finish_max_sum(MaxSum<A>& st) {
  if (st.m == std::numeric_limits<A>::infinity()) st.s = std::numeric_limits<A>::quiet_NaN();
  if (st.m == -std::numeric_limits<A>::infinity()) st.m = A(0);
}

}  // namespace kiln::cuda_kernels
