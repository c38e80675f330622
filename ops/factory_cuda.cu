// CUDA kernels of the factories: fill (any strides), arange, and the Philox random fills.
// The random kernel computes exactly what ops/factory_cpu.cpp computes for each element
// (same block, lane, bit grid and bound rule), so a seeded randn on the GPU equals the CPU's.
#include "../tensor/dtype_dispatch.h"
#include "../tensor/philox.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct FillFn {
  T value;
  __device__ T operator()() const { return value; }
};

void fill_cuda(const Tensor& out, const Scalar& value) {
  dispatch_all(out.dtype(), "fill", [&]<typename K>() {
    using T = device_t<K>;
    T v;
    if constexpr (is_half_v<T>) v = narrow<T>(static_cast<float>(value.to<double>()));
    else v = value.to<K>();
    map<K>("fill", out, FillFn<T>{v});
  });
}

template <typename T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = start + static_cast<double>(i) * step;
    if constexpr (std::is_integral_v<T>) out[i] = static_cast<T>(v);
    else out[i] = narrow<T>(static_cast<acc_t<T>>(v));
  }
}

void arange_cuda(const Tensor& out, double start, double step) {
  dispatch_numeric(out.dtype(), "arange", [&]<typename K>() {
    using T = device_t<K>;
    const int64_t n = out.numel();
    if (n == 0) return;
    cuda::DeviceGuard guard(out.device().index());
    arange_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(out)>>>(static_cast<T*>(out.data_ptr()), n, start, step);
    CUDA_CHECK(cudaGetLastError());
  });
}

// One thread per Philox block: `per` consecutive elements.
template <typename T>
__global__ void random_kernel(T* out, int64_t n, bool uniform, double a, double b, int digits, uint64_t seed,
                              uint64_t first_block, const uint64_t* __restrict__ graph_state) {
  philox::resolve_graph_state(graph_state, seed, first_block);
  constexpr int per = philox::per_block(static_cast<int>(sizeof(T)));
  const int64_t blocks = (n + per - 1) / per;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < blocks;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const philox::Block blk = philox::block(seed, first_block + static_cast<uint64_t>(k));
    for (int lane = 0; lane < per; ++lane) {
      const int64_t i = k * per + lane;
      if (i >= n) break;
      if (uniform) {
        const T v = narrow<T>(static_cast<acc_t<T>>(a + (b - a) * philox::uniform(blk, lane, per, digits)));
        // Rounding a + (b - a) * u to T can land on b, which [a, b) excludes (as on the CPU).
        out[i] = (b > a && static_cast<double>(widen(v)) >= b) ? narrow<T>(static_cast<acc_t<T>>(a)) : v;
      } else {
        out[i] = narrow<T>(static_cast<acc_t<T>>(a + b * philox::normal(blk, lane, per)));
      }
    }
  }
}

void random_cuda(RandomDist dist, const Tensor& out, double a, double b, PhiloxState state) {
  dispatch_floating(out.dtype(), "random", [&]<typename K>() {
    using T = device_t<K>;
    const int64_t n = out.numel();
    if (n == 0) return;
    cuda::DeviceGuard guard(out.device().index());
    const int per = philox::per_block(static_cast<int>(sizeof(T)));
    random_kernel<T><<<blocks_for((n + per - 1) / per), kThreads, 0, stream_of(out)>>>(
        static_cast<T*>(out.data_ptr()), n, dist == RandomDist::Uniform, a, b, significand_digits(out.dtype()),
        state.seed, state.first_block, state.graph_state);
    CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

void register_factory_kernels() {
  dispatch::fill_kernels.set(DeviceType::CUDA, &fill_cuda);
  dispatch::arange_kernels.set(DeviceType::CUDA, &arange_cuda);
  dispatch::random_kernels.set(DeviceType::CUDA, &random_cuda);
}

}  // namespace kiln::cuda_kernels
