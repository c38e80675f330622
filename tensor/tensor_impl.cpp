// Layout bookkeeping for TensorImpl.
#include "tensor_impl.h"

#include "../core/error.h"
#include "autograd_meta.h"
#include "shape.h"

namespace kiln {

TensorImpl::TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides,
                       int64_t offset, const char* op)
    : storage_(std::move(storage)), dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)),
      offset_(offset) {
  KILN_INTERNAL_ASSERT(storage_ != nullptr);
  refresh(op);
}

TensorImpl::TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides, int64_t numel,
                       ContiguousLayout)
    : storage_(std::move(storage)), dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(0),
      numel_(numel), contiguous_(true) {}

TensorImpl::~TensorImpl() = default;

AutogradMeta& TensorImpl::ensure_autograd_meta() {
  if (autograd_meta_ == nullptr) autograd_meta_ = std::make_unique<AutogradMeta>();
  return *autograd_meta_;
}

bool TensorImpl::autograd_requires_grad() const { return autograd_meta_->requires_grad || autograd_meta_->grad_fn; }

void TensorImpl::set_requires_grad(bool r) {
  if (!r && autograd_meta_ == nullptr) return;
  ensure_autograd_meta().requires_grad = r;
}

void TensorImpl::set_layout(Shape sizes, Shape strides, int64_t offset, const char* op) {
  KILN_INTERNAL_ASSERT(sizes.size() == strides.size(), "{}: {} sizes vs {} strides", op, sizes.size(), strides.size());
  // Checked before anything changes, so a refused layout leaves the tensor as it was.
  const int64_t numel = shape_numel(sizes, op);
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  numel_ = numel;
  contiguous_ = strides_are_contiguous(sizes_, strides_);
}

void TensorImpl::replace(std::shared_ptr<StorageImpl> storage, DType dtype, Shape sizes, Shape strides,
                         int64_t offset) {
  KILN_INTERNAL_ASSERT(storage != nullptr);
  set_layout(std::move(sizes), std::move(strides), offset, "replace");  // may throw: first
  storage_ = std::move(storage);
  dtype_ = dtype;
}

void TensorImpl::refresh(const char* op) {
  KILN_INTERNAL_ASSERT(sizes_.size() == strides_.size(), "{}: {} sizes vs {} strides", op, sizes_.size(),
                       strides_.size());
  numel_ = shape_numel(sizes_, op);
  contiguous_ = strides_are_contiguous(sizes_, strides_);
}

}  // namespace kiln
