// Tensor's metadata accessors that need a check or a message.
#include "tensor.h"

#include <ostream>

#include "autograd_meta.h"
#include "shape.h"

namespace kiln {

// wrap_dim lets a 0-dim tensor name dim 0 or -1 (reductions need that), but there is no
// size or stride to return for it: PyTorch refuses too.
int64_t Tensor::size(int64_t d) const {
  KILN_CHECK(dim() > 0, "size: a 0-dim tensor has no dimensions (asked for dim {})", d);
  return sizes()[wrap_dim(d, dim(), "size")];
}

int64_t Tensor::stride(int64_t d) const {
  KILN_CHECK(dim() > 0, "stride: a 0-dim tensor has no dimensions (asked for dim {})", d);
  return strides()[wrap_dim(d, dim(), "stride")];
}

Tensor& Tensor::requires_grad_(bool on) {
  KILN_CHECK(!on || is_floating_point(),
             "requires_grad_: only floating point tensors can require gradients, got dtype {}", dtype());
  KILN_CHECK(is_leaf() || on,
             "requires_grad_: you can only change requires_grad flags of leaf variables; to use a non-leaf "
             "without its history, use detach()");
  impl().set_requires_grad(on);
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor kNone;
  const AutogradMeta* meta = impl().autograd_meta();
  return meta != nullptr ? meta->grad : kNone;
}

Tensor& Tensor::mutable_grad() { return impl().ensure_autograd_meta().grad; }

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) {
    KILN_CHECK(grad.sizes() == sizes(), "set_grad: assigned grad has shape {} but the tensor has shape {}",
               grad.sizes(), sizes());
    KILN_CHECK(grad.dtype() == dtype() && grad.device() == device(),
               "set_grad: assigned grad is {} on {} but the tensor is {} on {}", grad.dtype(), grad.device(),
               dtype(), device());
  }
  impl().ensure_autograd_meta().grad = grad;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = impl().autograd_meta();
  return meta == nullptr || meta->grad_fn == nullptr;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  const AutogradMeta* meta = impl().autograd_meta();
  return meta != nullptr ? meta->grad_fn : kNone;
}

bool Tensor::retains_grad() const {
  const AutogradMeta* meta = impl().autograd_meta();
  return meta != nullptr && meta->retains_grad;
}

Tensor& Tensor::detach_() {
  if (AutogradMeta* meta = impl().autograd_meta()) {
    meta->grad_fn.reset();
    meta->requires_grad = false;
    meta->output_nr = 0;
  }
  return *this;
}

void Tensor::throw_undefined() {
  KILN_FAIL("Tensor: this handle is undefined (default-constructed); assign a tensor to it first");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
