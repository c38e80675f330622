// The CUDA copy kernel: every (destination, source) dtype pair over any strides on one
// device, with the CPU copy's conversion rules (device_types.cuh: convert).
#include "../tensor/dtype_dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/register.h"
#include "kernels.h"

namespace kiln::cuda_kernels {

namespace {

template <typename To, typename From>
struct ConvertFn {
  __device__ To operator()(From v) const { return convert<To>(v); }
};

void copy_cuda(const Tensor& dst, const Tensor& src) {
  KILN_CHECK(src.device() == dst.device(), "copy: the CUDA copy kernel needs both tensors on one device, got {} and {}",
             src.device().str(), dst.device().str());
  dispatch_all(dst.dtype(), "copy", [&]<typename ToK>() {
    dispatch_all(src.dtype(), "copy", [&]<typename FromK>() {
      map<ToK, FromK>("copy", dst, ConvertFn<device_t<ToK>, device_t<FromK>>{}, src);
    });
  });
}

}  // namespace

void register_copy_kernels() { dispatch::copy_kernels.set(DeviceType::CUDA, &copy_cuda); }

}  // namespace kiln::cuda_kernels
