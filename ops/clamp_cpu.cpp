// CPU body of clamp. Written as two selects, v < lo ? lo : v then hi < r ? hi : r, so a NaN
// element fails both tests and passes through, and a NaN bound (every comparison false)
// clamps nothing: PyTorch's scalar clamp. 16-bit floats compare in float against the bound
// rounded to the dtype, so the result is always the element or that rounded bound.
#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

template <typename T>
void clamp_typed(const Tensor& out, const Tensor& in, const std::optional<Scalar>& min,
                 const std::optional<Scalar>& max) {
  using A = acc_t<T>;
  const A lo = min ? static_cast<A>(min->to<T>()) : A(0);
  const A hi = max ? static_cast<A>(max->to<T>()) : A(0);
  const bool has_lo = min.has_value(), has_hi = max.has_value();
  map<T, T>(
      out,
      [=](T x) {
        A v = static_cast<A>(x);
        if (has_lo) v = v < lo ? lo : v;
        if (has_hi) v = hi < v ? hi : v;
        return static_cast<T>(v);
      },
      in);
}

void clamp_cpu(const Tensor& out, const Tensor& in, const std::optional<Scalar>& min,
               const std::optional<Scalar>& max) {
  dispatch_numeric(out.dtype(), "clamp", [&]<typename T>() { clamp_typed<T>(out, in, min, max); });
}

}  // namespace

void register_clamp_kernels() { dispatch::clamp_kernels.set(DeviceType::CPU, &clamp_cpu); }

}  // namespace kiln::cpu
