// TensorImpl: what a Tensor handle points to. Storage plus the layout that views change
// (sizes, strides, offset, all in elements), the dtype and device, and the autograd state
// (AutogradMeta, tensor/autograd_meta.h: absent until a tensor first requires grad).
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

struct AutogradMeta;

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
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  /// The autograd state, or null while the tensor neither requires grad nor has a grad.
  AutogradMeta* autograd_meta() const { return autograd_meta_.get(); }
  /// The autograd state, created on first use.
  AutogradMeta& ensure_autograd_meta();
  /// True when gradients flow to or through this tensor (a leaf that requires grad, or an
  /// op's output whose inputs did). Inline: every op asks this of its inputs.
  bool requires_grad() const { return autograd_meta_ != nullptr && autograd_requires_grad(); }
  /// Sets the leaf flag.
  void set_requires_grad(bool r);

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
  bool autograd_requires_grad() const;

  std::shared_ptr<StorageImpl> storage_;
  DType dtype_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_;
  int64_t numel_ = 1;
  bool contiguous_ = true;
  std::unique_ptr<AutogradMeta> autograd_meta_;
};

}  // namespace kiln
