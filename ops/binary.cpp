// Arithmetic ops and the shared binary path. Numbers become 0-dim CPU tensors of the
// compute dtype; every operand is broadcast to the output shape as a stride-0 view, so the
// kernels see one shape and never allocate.
#include "binary.h"

#include "../tensor/make.h"
#include "elementwise.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<BinaryKernel> binary_kernels;
}

namespace detail {

namespace {
bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

// Checks the promoted dtype against what the op accepts, with PyTorch's messages.
DType compute_dtype(const char* name, BinaryOp op, DType promoted, const Scalar& alpha) {
  switch (op) {
    case BinaryOp::Sub:
    case BinaryOp::Add:
      // PyTorch's alpha_check: a bool alpha needs a bool result, a floating alpha a floating one.
      KILN_CHECK(!(alpha.is_bool() && promoted != DType::Bool),
                 "{}: boolean alpha only supported for boolean results (got alpha {} for a {} result)", name, alpha,
                 promoted);
      KILN_CHECK(!(alpha.is_floating() && !is_floating(promoted)),
                 "{}: for integral input tensors, argument alpha must not be a floating point number (got {})", name,
                 alpha);
      return promoted;
    case BinaryOp::Div:
      return is_floating(promoted) ? promoted : DType::Float32;
    case BinaryOp::Pow:
      KILN_CHECK(promoted != DType::Bool, "{}: unsupported dtype bool (supported: int32, int64, float16, bfloat16, "
                                          "float32, float64)", name);
      return promoted;
    default:
      return promoted;
  }
}
}  // namespace

namespace {
// The eager fast path: two defined floating tensors of one dtype, device and shape under
// +, -, * or / with a non-bool alpha. Every check of the general path passes for them, the
// promoted dtype is theirs, and neither operand needs a cast or a broadcast view, so the
// kernel gets them as they are: no dtype arithmetic and no handle copies (each copy is an
// atomic reference-count update) on the way to the most common op call.
bool fast_path_applies(BinaryOp op, const Operand& a, const Operand& b, const Scalar& alpha) {
  if (op > BinaryOp::Div || a.tensor == nullptr || b.tensor == nullptr || alpha.is_bool()) return false;
  const Tensor& ta = *a.tensor;
  const Tensor& tb = *b.tensor;
  return ta.defined() && tb.defined() && ta.dtype() == tb.dtype() && is_floating(ta.dtype()) &&
         ta.device() == tb.device() && ta.sizes() == tb.sizes();
}
}  // namespace

Tensor binary_op(const OpDesc& desc, const Operand& a, const Operand& b, const Scalar& alpha) {
  const char* name = desc.name;
  const auto op = static_cast<BinaryOp>(desc.code);
  if (fast_path_applies(op, a, b, alpha)) {
    const Tensor& ta = *a.tensor;
    const Tensor& tb = *b.tensor;
    OpScope scope(desc, {&ta, &tb}, alpha, std::monostate{}, std::monostate{});
    Tensor out = new_contiguous(ta.sizes(), ta.dtype(), ta.device(), name);
    dispatch::binary_kernels.get(name, ta.device())(op, out, ta, tb, alpha);
    return scope.output(out);
  }
  KILN_INTERNAL_ASSERT(a.tensor || b.tensor, "{}: no tensor operand", name);
  if (a.tensor) check_defined(name, *a.tensor, "self");
  if (b.tensor) check_defined(name, *b.tensor, "other");
  const Device device = common_device(name, {a.tensor, b.tensor});

  ResultType rt;
  if (a.tensor) rt.add(*a.tensor);
  else rt.add(a.number);
  if (b.tensor) rt.add(*b.tensor);
  else rt.add(b.number);
  if (op == BinaryOp::Sub) {  // PyTorch's sub_check: any bool operand, tensor or number
    const bool a_bool = a.tensor ? a.tensor->dtype() == DType::Bool : a.number.is_bool();
    const bool b_bool = b.tensor ? b.tensor->dtype() == DType::Bool : b.number.is_bool();
    KILN_CHECK(!(a_bool && b_bool),
               "{}: subtraction with two bool tensors is not supported; use a != b (exclusive or) instead", name);
    KILN_CHECK(!a_bool && !b_bool,
               "{}: subtraction with a bool tensor is not supported; to invert a mask use "
               "mask == false instead", name);
  }
  const DType compute = compute_dtype(name, op, rt.get(), alpha);
  if (op == BinaryOp::Pow && !is_floating(compute) && !b.tensor)
    KILN_CHECK(b.number.to_int() >= 0 || b.number.is_floating(),
               "{}: integers to negative integer powers are not allowed (exponent {})", name, b.number);

  // References all the way (a number's shape is the shared empty one): the common
  // same-shape case copies no shape on the way to the output's allocation.
  static const Shape kNumberShape;
  const Shape& sa = a.tensor ? a.tensor->sizes() : kNumberShape;
  const Shape& sb = b.tensor ? b.tensor->sizes() : kNumberShape;
  Shape broadcast;
  const Shape& out_shape = sa == sb ? sa : (broadcast = broadcast_shapes(sa, sb, name));

  OpScope scope(desc, {a.tensor, b.tensor}, alpha, a.tensor ? std::optional<Scalar>() : a.number,
                b.tensor ? std::optional<Scalar>() : b.number);
  const Tensor ta = a.tensor ? a.tensor->to(compute) : scalar_tensor(a.number, compute);
  const Tensor tb = b.tensor ? b.tensor->to(compute) : scalar_tensor(b.number, compute);
  const DType out_dtype = is_comparison(op) ? DType::Bool : compute;
  Tensor out = new_contiguous(out_shape, out_dtype, device, name);
  dispatch::binary_kernels.get(name, device)(op, out, broadcast_view(ta, out_shape), broadcast_view(tb, out_shape),
                                             alpha);
  return scope.output(out);
}

}  // namespace detail

using detail::binary_op;

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary_op(op::add, a, b, alpha); }
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return binary_op(op::add, a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary_op(op::sub, a, b, alpha); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return binary_op(op::sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(op::mul, a, b); }
Tensor mul(const Tensor& a, const Scalar& b) { return binary_op(op::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(op::div, a, b); }
Tensor div(const Tensor& a, const Scalar& b) { return binary_op(op::div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(op::pow, a, b); }
Tensor pow(const Tensor& a, const Scalar& b) { return binary_op(op::pow, a, b); }
Tensor pow(const Scalar& a, const Tensor& b) { return binary_op(op::pow, a, b); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return binary_op(op::sub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return binary_op(op::div, a, b); }

}  // namespace kiln
