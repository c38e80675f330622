// Contiguous allocation and raw views.
#include "make.h"

#include "object_pool.h"

namespace kiln {

Tensor new_contiguous(const Shape& sizes, DType dtype, Device device, const char* op) {
  int64_t numel = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "{}: negative dimension {} in shape {}", op, s, shape_str(sizes));
    KILN_CHECK(s == 0 || numel <= INT64_MAX / s, "{}: shape {} has too many elements", op, shape_str(sizes));
    numel *= s;
  }
  const size_t nbytes = static_cast<size_t>(numel) * element_size(dtype);
  auto storage = allocate_storage(nbytes, device, op);
  return Tensor(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::move(storage), dtype, sizes,
                                                 contiguous_strides(sizes), numel, ContiguousLayout{}));
}

Tensor new_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), base.unsafe_impl()->storage(),
                                                 base.dtype(), std::move(sizes), std::move(strides), offset));
}

Tensor broadcast_view(const Tensor& t, const Shape& target) {
  if (t.sizes() == target) return t;
  return new_view(t, target, broadcast_strides(t.sizes(), t.strides(), target), t.storage_offset());
}

}  // namespace kiln
