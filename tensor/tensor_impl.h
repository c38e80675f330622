// TensorImpl: what a Tensor handle points to. Storage plus the layout that views change
// (sizes, strides, offset, all in elements), the dtype and device, and the autograd flag.
//
// numel and contiguity are cached because every op asks for them; set_layout() is the only
// way to change the layout, so the caches cannot go stale. The element count is computed
// with overflow checks: a layout whose sizes multiply past int64 is refused, naming `op`.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../core/device.h"
#include "dtype.h"
#include "object_pool.h"
#include "storage.h"

namespace kiln {

/// Sizes or strides of a tensor, outermost dimension first: a std::vector whose memory
/// comes from the per-thread object pool (object_pool.h), since every new tensor and view
/// makes two of them.
using Shape = std::vector<int64_t, PoolAllocator<int64_t>>;

/// Tag for TensorImpl's constructor of fresh contiguous tensors.
struct ContiguousLayout {};

/// The state behind a Tensor handle. Views share `storage` and own their layout.
class TensorImpl {
 public:
  /// A tensor over `storage` with the given layout; `op` names the caller when the sizes'
  /// element count overflows int64.
  TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides, int64_t offset,
             const char* op = "tensor");
  /// A fresh contiguous tensor whose row-major `strides` and element count `numel` the
  /// caller computed already (new_contiguous): nothing to recompute.
  TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides, int64_t numel,
             ContiguousLayout);

  const std::shared_ptr<StorageImpl>& storage() const { return storage_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return contiguous_; }
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool r) { requires_grad_ = r; }

  /// Address of the first element (storage base + offset).
  void* data() const {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
  }

  /// Replaces the layout; recomputes numel and contiguity.
  void set_layout(Shape sizes, Shape strides, int64_t offset, const char* op = "set_layout");
  /// Replaces storage, dtype and layout at once (what Module::to does to a parameter).
  void replace(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides, int64_t offset);

 private:
  void refresh(const char* op);

  std::shared_ptr<StorageImpl> storage_;
  DType dtype_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_;
  int64_t numel_ = 1;
  bool contiguous_ = true;
  bool requires_grad_ = false;
};

}  // namespace kiln
