// Copies and conversions: contiguous, clone, to(dtype), to(device), copy_, item and the
// dense CPU copies that to_vector() and printing read from. One copy kernel per device
// does every dtype conversion over any strides.
#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "transfer.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<CopyKernel> copy_kernels;
}

namespace {
// A contiguous copy of `src` as `dtype` on src's device.
Tensor copy_as(const char* op, const Tensor& src, DType dtype) {
  Tensor out = new_contiguous(src.sizes(), dtype, src.device(), op);
  dispatch::copy_kernels.get(op, src.device())(out, src);
  return out;
}
}  // namespace

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  OpScope scope("contiguous", {this});
  return scope.output(copy_as("contiguous", *this, dtype()));
}

Tensor Tensor::clone() const {
  OpScope scope("clone", {this});
  return scope.output(copy_as("clone", *this, dtype()));
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  OpScope scope("to", {this});
  return scope.output(copy_as("to", *this, dtype));
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  KILN_CHECK(cuda::is_built(), "to: cannot move a tensor from {} to {}: this build of Kiln has no CUDA support",
             this->device().str(), device.str());
  OpScope scope("to", {this});
  // Copy the elements densely on the source device first, then move the bytes once.
  const Tensor dense = contiguous();
  Tensor out = new_contiguous(sizes(), dtype(), device, "to");
  detail::copy_between_devices(out, dense);
  return scope.output(out);
}

Tensor Tensor::to(Device device, DType dtype) const { return to(device).to(dtype); }

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_", src, "src");
  const Shape target = broadcast_shapes(src.sizes(), sizes(), "copy_");
  KILN_CHECK(target == sizes(), "copy_: source of shape {} cannot be broadcast to destination shape {}",
             shape_str(src.sizes()), shape_str(sizes()));
  for (int64_t d = 0; d < dim(); ++d)
    KILN_CHECK(strides()[d] != 0 || sizes()[d] <= 1,
               "copy_: the destination (shape {}, strides {}) has elements that share memory (an expanded view); "
               "call clone() on it first",
               shape_str(sizes()), shape_str(strides()));
  if (src.device() != device()) {
    // Across devices: convert on the source device, move the bytes, then copy in place
    // (which broadcasts and writes through this tensor's strides).
    KILN_CHECK(cuda::is_built(), "copy_: cannot copy from {} to {}: this build of Kiln has no CUDA support",
               src.device().str(), device().str());
    const Tensor converted = src.to(dtype());
    if (is_contiguous() && converted.sizes() == sizes()) {
      // Straight into this tensor's memory (DMA into pinned host memory at full speed).
      OpScope scope("copy_", {this, &src});
      detail::copy_between_devices(*this, converted.contiguous());
      scope.output(*this);
      return *this;
    }
    return copy_(converted.to(device()));
  }
  OpScope scope("copy_", {this, &src});
  // A source sharing memory with the destination is copied out first, so overlapping
  // reads and writes cannot mix.
  const Tensor source = src.is_alias_of(*this) ? copy_as("copy_", src, src.dtype()) : src;
  dispatch::copy_kernels.get("copy_", device())(*this, broadcast_view(source, sizes()));
  scope.output(*this);
  return *this;
}

void Tensor::set_data(const Tensor& other) {
  check_defined("set_data", other, "other");
  TensorImpl* src = other.unsafe_impl();
  impl().replace(src->storage(), src->dtype(), src->sizes(), src->strides(), src->offset());
}

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, "item: a tensor with {} elements (shape {}) cannot be converted to a Scalar", numel(),
             shape_str(sizes()));
  const Tensor c = dense_cpu_copy(dtype());
  Scalar result;
  dispatch_all(dtype(), "item", [&]<typename T>() {
    const T v = *static_cast<const T*>(c.data_ptr());
    if constexpr (std::is_same_v<T, bool>) result = Scalar(v);
    else if constexpr (std::is_integral_v<T>) result = Scalar(static_cast<int64_t>(v));
    else result = Scalar(static_cast<double>(static_cast<acc_t<T>>(v)));
  });
  return result;
}

Tensor Tensor::dense_cpu_copy(DType dtype) const {
  const Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  if (host.dtype() == dtype && host.is_contiguous()) return host;
  return copy_as("to", host, dtype);
}

}  // namespace kiln
