// CUDA body of clamp: the formula of clamp_math.h, the same functor the CPU kernel calls
// (NaN elements pass through, a NaN bound clamps nothing), with the bound rounded to the
// dtype on the host and compared in float for the 16-bit types: CPU and GPU results are
// bit-identical.
#include "../tensor/dtype_dispatch.h"
#include "clamp_math.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct ClampFn {
  math::Clamp<acc_t<T>> formula;
  __device__ T operator()(T x) const { return narrow<T>(formula(widen(x))); }
};

void clamp_cuda(const Tensor& out, const Tensor& in, const std::optional<Scalar>& min,
                const std::optional<Scalar>& max) {
  dispatch_numeric(out.dtype(), "clamp", [&]<typename K>() {
    map<K, K>("clamp", out, ClampFn<device_t<K>>{math::make_clamp<K>(min, max)}, in);
  });
}

}  // namespace

void register_clamp_kernels() { dispatch::clamp_kernels.set(DeviceType::CUDA, &clamp_cuda); }

}  // namespace kiln::cuda_kernels
