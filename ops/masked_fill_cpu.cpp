// CPU body of masked_fill: one walk over the target and the (broadcast) mask.
#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {

void masked_fill_cpu(const Tensor& out, const Tensor& mask, const Scalar& value) {
  dispatch_all(out.dtype(), "masked_fill", [&]<typename T>() {
    const T v = value.to<T>();
    walk<2>(out.sizes(), {operand(out), operand(mask)}, [v](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        if (*reinterpret_cast<const bool*>(p[1] + i * s[1])) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
    });
  });
}

}  // namespace

void register_masked_fill_kernels() { dispatch::masked_fill_kernels.set(DeviceType::CPU, &masked_fill_cpu); }

}  // namespace kiln::cpu
