// Contiguous allocation and raw views.
#include "make.h"

#include "object_pool.h"

namespace kiln {

Tensor new_contiguous(const Shape& sizes, DType dtype, Device device, const char* op) {
  for (int64_t s : sizes) KILN_CHECK(s >= 0, "{}: negative dimension {} in shape {}", op, s, shape_str(sizes));
  const int64_t numel = shape_numel(sizes, op);
  const int64_t nbytes = checked_nbytes(sizes, numel, element_size(dtype), op);
  Shape strides = contiguous_strides(sizes, op);
  // Strides stay below numel unless the tensor is empty, where an outer one can still be
  // too large in bytes ([4, 2^62, 0] of float64).
  if (numel == 0) check_byte_strides(sizes, strides, element_size(dtype), op);
  auto storage = allocate_storage(static_cast<size_t>(nbytes), device, op);
  return Tensor(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::move(storage), dtype, sizes,
                                                 std::move(strides), numel, ContiguousLayout{}));
}

Tensor new_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset, const char* op) {
  return Tensor(std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), base.unsafe_impl()->storage(),
                                                 base.dtype(), std::move(sizes), std::move(strides), offset, op));
}

Tensor broadcast_view(const Tensor& t, const Shape& target) {
  if (t.sizes() == target) return t;
  return new_view(t, target, broadcast_strides(t.sizes(), t.strides(), target), t.storage_offset(), "broadcast");
}

}  // namespace kiln
