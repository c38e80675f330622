// Validation and broadcasting of masked_fill; the writes are in masked_fill_cpu.cpp and
// masked_fill_cuda.cu. The out-of-place form copies x into a fresh tensor of the broadcast
// shape (the copy kernel) and fills that in place.
#include "masked_fill.h"

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<MaskedFillKernel> masked_fill_kernels;
}

namespace {
void check_mask(const char* name, const Tensor& x, const Tensor& mask) {
  check_defined(name, x, "self");
  check_defined(name, mask, "mask");
  KILN_CHECK(mask.dtype() == DType::Bool, "{}: expected a bool mask, got dtype {}", name, mask.dtype());
  // Strictly one device: the kernel reads the mask where it writes x.
  KILN_CHECK(mask.device() == x.device(), "{}: expected the mask on {} (self's device), got {}", name,
             x.device().str(), mask.device().str());
}
}  // namespace

Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  check_mask("masked_fill_", x, mask);
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill_");
  KILN_CHECK(shape == x.sizes(), "masked_fill_: mask of shape {} cannot be broadcast to the tensor's shape {}",
             shape_str(mask.sizes()), shape_str(x.sizes()));
  for (int64_t d = 0; d < x.dim(); ++d)
    KILN_CHECK(x.strides()[d] != 0 || x.sizes()[d] <= 1,
               "masked_fill_: the tensor (shape {}, strides {}) has elements that share memory (an expanded view); "
               "call clone() on it first", shape_str(x.sizes()), shape_str(x.strides()));
  OpScope scope(op::masked_fill_, {&x, &mask}, value);
  // A mask sharing memory with x (a bool x masked by a view of itself) is read before any write.
  const Tensor m = mask.is_alias_of(x) ? mask.clone() : mask;
  dispatch::masked_fill_kernels.get("masked_fill_", x.device())(x, broadcast_view(m, shape), value);
  return scope.output_in_place(x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  check_mask("masked_fill", x, mask);
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill");
  OpScope scope(op::masked_fill, {&x, &mask}, value);
  Tensor out = new_contiguous(shape, x.dtype(), x.device(), "masked_fill");
  dispatch::copy_kernels.get("masked_fill", x.device())(out, broadcast_view(x, shape));
  dispatch::masked_fill_kernels.get("masked_fill", x.device())(out, broadcast_view(mask, shape), value);
  return scope.output(out);
}

}  // namespace kiln
