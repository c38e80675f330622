// Copies and conversions: contiguous, clone, to(dtype), to(device), copy_, item and the
// dense host copy behind to_vector(). One copy kernel per device does every dtype conversion
// over any strides; moves between devices are in transfer.cpp.
//
// Each public call is an op, nested as PyTorch's are, so the profiler's table reads like
// PyTorch's and a device copy's memcpy row sits under the op that issued it:
//   contiguous > clone > copy_        to > _to_copy > copy_        item > _local_scalar_dense
// to() of a tensor that already has the dtype / device returns it without opening a scope:
// ops convert their operands with to(dtype), and a no-op row under every op would be noise.
#include <cstring>
#include <type_traits>

#include "../tensor/dtype_dispatch.h"
#include "../tensor/make.h"
#include "factory.h"
#include "kernels.h"
#include "op_scope.h"
#include "transfer.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<CopyKernel> copy_kernels;
}

namespace {
// The copy_ op of clone and to(dtype): `src` into `out`, a fresh contiguous tensor of src's
// shape on src's device (nothing to validate: the caller made it).
void copy_into_fresh(const Tensor& out, const Tensor& src) {
  OpScope scope(op::copy_, {&out, &src}, false);
  dispatch::copy_kernels.get("copy_", src.device())(out, src);
  scope.done();
}

// The clone op; `user_op` is the op the user called (contiguous or clone), which errors name.
Tensor clone_for(const Tensor& self, const char* user_op) {
  OpScope scope(op::clone, {&self});
  Tensor out = new_contiguous(self.sizes(), self.dtype(), self.device(), user_op);
  copy_into_fresh(out, self);
  return scope.output(out);
}
}  // namespace

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  OpScope scope(op::contiguous, {this});
  return scope.output(clone_for(*this, "contiguous"));
}

Tensor Tensor::clone() const { return clone_for(*this, "clone"); }

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  OpScope scope(op::to, {this}, device(), dtype, false);
  OpScope to_copy(op::_to_copy, {this}, device(), dtype, false);
  Tensor out = new_contiguous(sizes(), dtype, device(), "to");
  copy_into_fresh(out, *this);
  to_copy.output(out);
  return scope.output(out);
}

Tensor Tensor::to(Device device) const { return to(device, false); }

Tensor Tensor::to(Device device, DType dtype) const { return to(device, dtype, false); }

Tensor& Tensor::copy_(const Tensor& src) { return copy_(src, false); }

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
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
    KILN_CHECK(cuda::is_built(), "copy_: cannot copy from {} to {}: this build of Kiln has no CUDA support",
               src.device().str(), device().str());
    OpScope scope(op::copy_, {this, &src}, non_blocking);
    detail::copy_across_devices(*this, src, non_blocking);
    return scope.output_in_place(*this);
  }
  OpScope scope(op::copy_, {this, &src}, non_blocking);
  // A source sharing memory with the destination is copied out first, so overlapping
  // reads and writes cannot mix.
  const Tensor source = src.is_alias_of(*this) ? src.clone() : src;
  dispatch::copy_kernels.get("copy_", device())(*this, broadcast_view(source, sizes()));
  return scope.output_in_place(*this);
}

void Tensor::set_data(const Tensor& other) {
  check_defined("set_data", other, "other");
  TensorImpl* src = other.unsafe_impl();
  impl().replace(src->storage(), src->dtype(), src->sizes(), src->strides(), src->offset());
}

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, "item: a tensor with {} elements (shape {}) cannot be converted to a Scalar", numel(),
             shape_str(sizes()));
  OpScope scope(op::item, {this});
  OpScope dense(op::_local_scalar_dense, {this});
  alignas(8) unsigned char bytes[8];
  detail::read_element(*this, bytes);
  Scalar result;
  dispatch_all(dtype(), "item", [&]<typename T>() {
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    if constexpr (std::is_same_v<T, bool>) result = Scalar(v);
    else if constexpr (std::is_integral_v<T>) result = Scalar(static_cast<int64_t>(v));
    else result = Scalar(static_cast<double>(static_cast<acc_t<T>>(v)));
  });
  return result;
}

void Tensor::copy_to_host(void* out, DType dtype) const {
  OpScope scope(op::to_vector, {this});
  if (numel() == 0) return;
  // A CPU tensor over the caller's buffer: copy_ converts, walks any strides and moves the
  // bytes across devices in one go, straight into it.
  Tensor dst = from_blob(out, sizes(), TensorOptions(dtype));
  dst.copy_(*this);
}

}  // namespace kiln
