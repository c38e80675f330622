// CUDA bodies of the fused optimizer steps, both calling the functors of optimizer_math.h:
//   - per parameter: a grid-stride kernel over one parameter's elements, contiguous or
//     strided (dims collapsed, as the elementwise engine does);
//   - multi-tensor: every parameter of a list in one launch (cuda/multi_tensor_apply.cuh),
//     used by the list ops when all tensors are contiguous with one dtype.
// Per-tensor scalars (step size, bias correction) are computed on the host in double and
// rounded to the arithmetic type the same way on both paths, and the build compiles this
// file with --fmad=false (no multiply-add contraction, as the CPU file), so the two paths and
// the CPU give the same bits.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/multi_tensor_apply.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

// The functors' calls over an operand array: values[0] param, [1] grad, then the state.
struct ApplyStep {
  template <typename A>
  __device__ __forceinline__ void operator()(const SgdFunctor<A>& f, A (&v)[3]) const {
    f(v[0], v[1], v[2]);
  }
  template <typename A>
  __device__ __forceinline__ void operator()(const SgdFunctor<A>& f, A (&v)[2]) const {
    A unused = 0;
    f(v[0], v[1], unused);
  }
  template <typename A>
  __device__ __forceinline__ void operator()(const AdamFunctor<A>& f, A (&v)[5]) const {
    f(v[0], v[1], v[2], v[3], v[4]);
  }
  template <typename A>
  __device__ __forceinline__ void operator()(const AdamFunctor<A>& f, A (&v)[4]) const {
    A unused = 0;
    f(v[0], v[1], v[2], v[3], unused);
  }
};

template <typename T, int N>
struct Operands {
  T* p[N];
};

template <typename T, int N, typename F>
__global__ void step_contiguous_kernel(int64_t n, Operands<T, N> ops, F f) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    A v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = widen(ops.p[k][i]);
    ApplyStep{}(f, v);
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k != 1) ops.p[k][i] = narrow<T>(v[k]);
  }
}

template <typename T, int N, typename F>
__global__ void step_strided_kernel(int64_t n, Indexer<N> idx, Operands<T, N> ops, F f) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[N];
    idx.offsets(i, off);
    A v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = widen(ops.p[k][off[k]]);
    ApplyStep{}(f, v);
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k != 1) ops.p[k][off[k]] = narrow<T>(v[k]);
  }
}

// Runs functor f over N operands of one shape (operand 0 the parameter), any strides.
template <typename K, int N, typename F>
void step_one(const char* op, const std::array<const Tensor*, N>& operands, const F& f) {
  using T = device_t<K>;
  const Tensor& param = *operands[0];
  const int64_t n = param.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(param.device().index());
  const cudaStream_t stream = stream_of(param);
  Operands<T, N> ops;
  bool contiguous = true;
  for (int k = 0; k < N; ++k) {
    ops.p[k] = static_cast<T*>(operands[static_cast<size_t>(k)]->data_ptr());
    contiguous = contiguous && operands[static_cast<size_t>(k)]->is_contiguous();
  }
  if (contiguous) {
    launch_updatable(&step_contiguous_kernel<T, N, F>, dim3(static_cast<unsigned>(blocks_for(n))), dim3(kThreads), stream,
                     n, ops, f);
  } else {
    std::array<DimValues, N> strides;
    std::array<const DimValues*, N> ptrs;
    for (size_t k = 0; k < N; ++k) {
      for (int64_t s : operands[k]->strides()) strides[k].push_back(s);
      ptrs[k] = &strides[k];
    }
    const CollapsedDims<N> dims = collapse_dims<N>(param.sizes(), ptrs);
    KILN_CHECK(static_cast<int>(dims.sizes.size()) <= kMaxDims,
               "{}: the operands' layout needs {} dims after collapsing; the CUDA kernels index at most {} (call "
               "contiguous() on them)",
               op, dims.sizes.size(), kMaxDims);
    Indexer<N> idx;
    idx.ndim = static_cast<int>(dims.sizes.size());
    for (int d = 0; d < idx.ndim; ++d) {
      idx.sizes[d] = dims.sizes[static_cast<size_t>(d)];
      for (size_t k = 0; k < N; ++k) idx.strides[d][k] = dims.strides[static_cast<size_t>(d)][k];
    }
    launch_updatable(&step_strided_kernel<T, N, F>, dim3(static_cast<unsigned>(blocks_for(n))), dim3(kThreads), stream,
                     n, idx, ops, f);
  }
}

void sgd_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConfig& config,
                   bool first_step) {
  dispatch_floating(param.dtype(), "_fused_sgd_", [&]<typename K>() {
    using A = acc_t<device_t<K>>;
    const SgdFunctor<A> f = SgdFunctor<A>::make(config, first_step);
    if (momentum_buffer.defined())
      step_one<K, 3>("_fused_sgd_", {&param, &grad, &momentum_buffer}, f);
    else
      step_one<K, 2>("_fused_sgd_", {&param, &grad}, f);
  });
}

void adam_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_exp_avg_sq, double step, const AdamConfig& config, bool decoupled) {
  const char* op = decoupled ? "_fused_adamw_" : "_fused_adam_";
  dispatch_floating(param.dtype(), op, [&]<typename K>() {
    using A = acc_t<device_t<K>>;
    const AdamFunctor<A> f = AdamFunctor<A>::make(config, decoupled, step);
    if (max_exp_avg_sq.defined())
      step_one<K, 5>(op, {&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq}, f);
    else
      step_one<K, 4>(op, {&param, &grad, &exp_avg, &exp_avg_sq}, f);
  });
}

void sgd_multi_step_cuda(std::span<const Tensor> params, std::span<const Tensor> grads,
                         std::span<const Tensor> momentum_buffers, const SgdConfig& config,
                         std::span<const bool> first_steps) {
  dispatch_floating(params[0].dtype(), "_fused_sgd_", [&]<typename K>() {
    using A = acc_t<device_t<K>>;
    const SgdFunctor<A> f = SgdFunctor<A>::make(config, false);
    auto scalars = [&](size_t i, A& s0, A& s1) {
      s0 = first_steps[i] ? A(1) : A(0);
      s1 = A(0);
    };
    if (!momentum_buffers.empty())
      multi_tensor_apply<K, 3, A>("_fused_sgd_", {params, grads, momentum_buffers}, f, ApplyStep{}, scalars);
    else
      multi_tensor_apply<K, 2, A>("_fused_sgd_", {params, grads}, f, ApplyStep{}, scalars);
  });
}

void adam_multi_step_cuda(std::span<const Tensor> params, std::span<const Tensor> grads,
                          std::span<const Tensor> exp_avgs, std::span<const Tensor> exp_avg_sqs,
                          std::span<const Tensor> max_exp_avg_sqs, std::span<const double> steps,
                          const AdamConfig& config, bool decoupled) {
  const char* op = decoupled ? "_fused_adamw_" : "_fused_adam_";
  dispatch_floating(params[0].dtype(), op, [&]<typename K>() {
    using A = acc_t<device_t<K>>;
    // The per-tensor fields are replaced by each tensor's scalars in the kernel.
    const AdamFunctor<A> f = AdamFunctor<A>::make(config, decoupled, 1.0);
    auto scalars = [&](size_t i, A& s0, A& s1) {
      double step_size = 0, bc2_sqrt = 0;
      AdamFunctor<A>::step_scalars(config, steps[i], step_size, bc2_sqrt);
      s0 = static_cast<A>(step_size);
      s1 = static_cast<A>(bc2_sqrt);
    };
    if (!max_exp_avg_sqs.empty())
      multi_tensor_apply<K, 5, A>(op, {params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs}, f, ApplyStep{}, scalars);
    else
      multi_tensor_apply<K, 4, A>(op, {params, grads, exp_avgs, exp_avg_sqs}, f, ApplyStep{}, scalars);
  });
}

}  // namespace

void register_optimizer_step_kernels() {
  dispatch::sgd_step_kernels.set(DeviceType::CUDA, &sgd_step_cuda);
  dispatch::adam_step_kernels.set(DeviceType::CUDA, &adam_step_cuda);
  dispatch::sgd_multi_step_kernels.set(DeviceType::CUDA, &sgd_multi_step_cuda);
  dispatch::adam_multi_step_kernels.set(DeviceType::CUDA, &adam_multi_step_cuda);
}

}  // namespace kiln::cuda_kernels
