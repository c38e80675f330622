// Tensor's metadata accessors that need a check or a message.
#include "tensor.h"

#include <ostream>

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
  impl().set_requires_grad(on);
  return *this;
}

void Tensor::throw_undefined() {
  KILN_FAIL("Tensor: this handle is undefined (default-constructed); assign a tensor to it first");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
