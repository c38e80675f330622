// CUDA body of masked_fill: the elementwise engine with the target as both output and input
// (each element is read and written by the same thread), the value converted on the host.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct MaskedFillFn {
  T value;
  __device__ T operator()(T x, bool m) const { return m ? value : x; }
};

void masked_fill_cuda(const Tensor& out, const Tensor& mask, const Scalar& value) {
  dispatch_all(out.dtype(), "masked_fill", [&]<typename K>() {
    using T = device_t<K>;
    // The value as the CPU converts it (to<K>), moved to the device type exactly.
    MaskedFillFn<T> f{};
    if constexpr (is_half_v<T>) f.value = narrow<T>(static_cast<float>(value.to<K>()));
    else f.value = value.to<K>();
    map<K, K, bool>("masked_fill", out, f, out, mask);
  });
}

}  // namespace

void register_masked_fill_kernels() { dispatch::masked_fill_kernels.set(DeviceType::CUDA, &masked_fill_cuda); }

}  // namespace kiln::cuda_kernels
