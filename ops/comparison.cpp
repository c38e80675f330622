// Comparison ops (through the shared binary path), where(), equal() and allclose().
#include "comparison.h"

#include <cmath>

#include "../tensor/make.h"
#include "elementwise.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<WhereKernel> where_kernels;
}

using detail::binary_op;

Tensor eq(const Tensor& a, const Tensor& b) { return binary_op(op::eq, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return binary_op(op::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_op(op::ne, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return binary_op(op::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_op(op::lt, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return binary_op(op::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_op(op::le, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return binary_op(op::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_op(op::gt, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return binary_op(op::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_op(op::ge, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return binary_op(op::ge, a, b); }

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond, "condition");
  check_defined("where", a, "self");
  check_defined("where", b, "other");
  KILN_CHECK(cond.dtype() == DType::Bool, "where: expected condition to be a bool tensor, got {}", cond.dtype());
  const Device device = common_device("where", {&cond, &a, &b});
  const DType dtype = result_type(a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  OpScope scope(op::where, {&cond, &a, &b});
  Tensor out = new_contiguous(shape, dtype, device, "where");
  // A 0-dim CPU operand joining a GPU op (a number) moves to the device: where() reads
  // every operand through the same kernel.
  auto on_device = [&](const Tensor& t) { return t.device() == device ? t : t.to(device); };
  dispatch::where_kernels.get("where", device)(out, broadcast_view(on_device(cond), shape),
                                               broadcast_view(on_device(a.to(dtype)), shape),
                                               broadcast_view(on_device(b.to(dtype)), shape));
  return scope.output(out);
}

Tensor where(const Tensor& cond, const Scalar& a, const Scalar& b) {
  check_defined("where", cond, "condition");
  const DType dtype = ResultType().add(a).add(b).get();
  return where(cond, scalar_tensor(a, dtype), scalar_tensor(b, dtype));
}

bool equal(const Tensor& a, const Tensor& b) {
  check_defined("equal", a, "self");
  check_defined("equal", b, "other");
  OpScope scope(op::equal, {&a, &b});
  if (a.sizes() != b.sizes()) return false;
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  return va == vb;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_defined("allclose", a, "self");
  check_defined("allclose", b, "other");
  KILN_CHECK(rtol >= 0 && atol >= 0, "allclose: rtol ({}) and atol ({}) must be non-negative", rtol, atol);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "allclose");
  OpScope scope(op::allclose, {&a, &b}, rtol, atol, equal_nan);
  const auto va = broadcast_view(a, shape).to_vector<double>();
  const auto vb = broadcast_view(b, shape).to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    const double x = va[i], y = vb[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (equal_nan && std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (x == y) continue;  // equal infinities
    // As PyTorch's isclose: an infinite difference (inf vs -inf, inf vs finite) is never
    // close, even though atol + rtol * |inf| is infinite too.
    const double diff = std::abs(x - y);
    if (!(std::isfinite(diff) && diff <= atol + rtol * std::abs(y))) return false;
  }
  return true;
}

}  // namespace kiln
