// Layout bookkeeping for TensorImpl.
#include "tensor_impl.h"

#include "../core/error.h"
#include "shape.h"

namespace kiln {

TensorImpl::TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides,
                       int64_t offset)
    : storage_(std::move(storage)), dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)),
      offset_(offset) {
  KILN_INTERNAL_ASSERT(storage_ != nullptr);
  refresh();
}

TensorImpl::TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides, int64_t numel,
                       ContiguousLayout)
    : storage_(std::move(storage)), dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(0),
      numel_(numel), contiguous_(true) {}

void TensorImpl::set_layout(Shape sizes, Shape strides, int64_t offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::replace(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides,
                         int64_t offset) {
  KILN_INTERNAL_ASSERT(storage != nullptr);
  storage_ = std::move(storage);
  dtype_ = dtype;
  set_layout(std::move(sizes), std::move(strides), offset);
}

void TensorImpl::refresh() {
  KILN_INTERNAL_ASSERT(sizes_.size() == strides_.size(), "{} sizes vs {} strides", sizes_.size(), strides_.size());
  numel_ = shape_numel(sizes_);
  contiguous_ = strides_are_contiguous(sizes_, strides_);
}

}  // namespace kiln
