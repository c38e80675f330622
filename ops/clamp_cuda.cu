// CUDA body of clamp, the same two selects as clamp_cpu.cpp (NaN elements pass through, a
// NaN bound clamps nothing), with the bound rounded to the dtype on the host and compared in
// float for the 16-bit types: CPU and GPU results are bit-identical.
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename T>
struct ClampFn {
  acc_t<T> lo, hi;
  bool has_lo, has_hi;
  __device__ T operator()(T x) const {
    acc_t<T> v = widen(x);
    if (has_lo) v = v < lo ? lo : v;
    if (has_hi) v = hi < v ? hi : v;
    return narrow<T>(v);
  }
};

void clamp_cuda(const Tensor& out, const Tensor& in, const std::optional<Scalar>& min,
                const std::optional<Scalar>& max) {
  dispatch_numeric(out.dtype(), "clamp", [&]<typename K>() {
    using T = device_t<K>;
    ClampFn<T> f{};
    f.has_lo = min.has_value();
    f.has_hi = max.has_value();
    // Rounded to the element type first, then widened as the CPU does.
    if (f.has_lo) f.lo = static_cast<acc_t<T>>(static_cast<kiln::acc_t<K>>(min->to<K>()));
    if (f.has_hi) f.hi = static_cast<acc_t<T>>(static_cast<kiln::acc_t<K>>(max->to<K>()));
    map<K, K>("clamp", out, f, in);
  });
}

}  // namespace

void register_clamp_kernels() { dispatch::clamp_kernels.set(DeviceType::CUDA, &clamp_cuda); }

}  // namespace kiln::cuda_kernels
