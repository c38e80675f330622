// CPU body of clamp: the formula of clamp_math.h (shared with the CUDA kernel) applied
// elementwise. NaN elements pass through and a NaN bound clamps nothing; 16-bit floats
// compare in float against the bound rounded to the dtype.
#include "../tensor/dtype_dispatch.h"
#include "clamp_math.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

void clamp_cpu(const Tensor& out, const Tensor& in, const std::optional<Scalar>& min,
               const std::optional<Scalar>& max) {
  dispatch_numeric(out.dtype(), "clamp", [&]<typename T>() {
    using A = acc_t<T>;
    const math::Clamp<A> formula = math::make_clamp<T>(min, max);
    map<T, T>(out, [formula](T x) { return static_cast<T>(formula(static_cast<A>(x))); }, in);
  });
}

}  // namespace

void register_clamp_kernels() { dispatch::clamp_kernels.set(DeviceType::CPU, &clamp_cpu); }

}  // namespace kiln::cpu
