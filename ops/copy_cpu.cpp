// The CPU copy kernel: every (destination, source) dtype pair over any strides.
#include "../tensor/convert.h"
#include "../tensor/dtype_dispatch.h"
#include "cpu/loops.h"
#include "cpu/register.h"
#include "kernels.h"

namespace kiln::cpu {

namespace {
void copy_cpu(const Tensor& dst, const Tensor& src) {
  dispatch_all(dst.dtype(), "copy", [&]<typename To>() {
    dispatch_all(src.dtype(), "copy", [&]<typename From>() {
      map<To, From>(dst, [](From v) { return convert<To>(v); }, src);
    });
  });
}
}  // namespace

void register_copy_kernels() { dispatch::copy_kernels.set(DeviceType::CPU, &copy_cpu); }

}  // namespace kiln::cpu
