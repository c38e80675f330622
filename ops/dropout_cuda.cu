// CUDA dropout, bit-identical to ops/dropout_cpu.cpp: element i is kept when lane i % 4 of
// Philox block (first_block + i / 4) is, as philox::uniform_float, at least p, and a kept
// element is x * (1 / (1 - p)) with the scale and the product in the CPU's arithmetic type
// (float for the 16-bit types, rounded to nearest even). One thread per Philox block, i.e.
// per 4 consecutive elements, loaded and stored as one vector when both tensors are
// aligned for it.
#include "../tensor/dtype_dispatch.h"
#include "../tensor/philox.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

/// The CPU's result for one element.
template <typename T>
__device__ __forceinline__ T drop(T x, uint32_t bits, float threshold, acc_t<T> scale) {
  return philox::uniform_float(bits) >= threshold ? narrow<T>(widen(x) * scale) : narrow<T>(acc_t<T>(0));
}

template <typename T>
__global__ void dropout_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t n, float threshold,
                               acc_t<T> scale, uint64_t seed, uint64_t first_block,
                               const uint64_t* __restrict__ graph_state, bool vec) {
  philox::resolve_graph_state(graph_state, seed, first_block);
  const int64_t blocks = (n + 3) / 4;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < blocks;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const philox::Block blk = philox::block(seed, first_block + static_cast<uint64_t>(k));
    const int64_t first = k * 4;
    if (vec && first + 4 <= n) {
      const Vec<T, 4> x = *reinterpret_cast<const Vec<T, 4>*>(in + first);
      Vec<T, 4> o;
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) o.v[lane] = drop(x.v[lane], blk.x[lane], threshold, scale);
      *reinterpret_cast<Vec<T, 4>*>(out + first) = o;
    } else {
      for (int lane = 0; lane < 4 && first + lane < n; ++lane)
        out[first + lane] = drop(in[first + lane], blk.x[lane], threshold, scale);
    }
  }
}

void dropout_cuda(const Tensor& out, const Tensor& in, double p, PhiloxState state) {
  KILN_CHECK(out.is_contiguous() && in.is_contiguous() && out.numel() == in.numel(),
             "dropout: the CUDA kernel expects contiguous input and output of one size");
  const int64_t n = in.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(out.device().index());
  const float threshold = static_cast<float>(p);
  dispatch_floating(in.dtype(), "dropout", [&]<typename K>() {
    using T = device_t<K>;
    // The CPU's scale: 1 / (1 - p) in double, then its arithmetic type.
    const auto scale = static_cast<acc_t<T>>(p < 1.0 ? 1.0 / (1.0 - p) : 0.0);
    const T* x = static_cast<const T*>(in.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const bool vec = aligned_for<T>(x, 4) && aligned_for<T>(y, 4);
    dropout_kernel<T><<<blocks_for((n + 3) / 4), kThreads, 0, stream_of(out)>>>(y, x, n, threshold, scale, state.seed,
                                                                                 state.first_block, state.graph_state,
                                                                                 vec);
    CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

void register_dropout_kernels() { dispatch::dropout_kernels.set(DeviceType::CUDA, &dropout_cuda); }

}  // namespace kiln::cuda_kernels
