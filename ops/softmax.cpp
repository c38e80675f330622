// softmax / log_softmax validation and dispatch.
#include "softmax.h"

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<SoftmaxKernel> softmax_kernels;
}

namespace {
Tensor softmax_op(const OpDesc& desc, const Tensor& x, int64_t dim, bool log) {
  const char* name = desc.name;
  check_defined(name, x);
  const int64_t d = wrap_dim(dim, x.dim(), name);
  KILN_CHECK(is_floating(x.dtype()), "{}: unsupported dtype {} (supported: float16, bfloat16, float32, float64)", name,
             x.dtype());
  OpScope scope(desc, {&x}, dim);
  Tensor out = new_contiguous(x.sizes(), x.dtype(), x.device(), name);
  dispatch::softmax_kernels.get(name, x.device())(out, x, x.dim() == 0 ? 0 : d, log);
  return scope.output(out);
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(op::softmax, x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(op::log_softmax, x, dim, true); }

}  // namespace kiln
