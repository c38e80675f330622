// Validation and dtype rules of the unary ops; the arithmetic is in unary_cpu.cpp.
#include "unary.h"

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<UnaryKernel> unary_kernels;
}

namespace {

// How an op maps its input dtype to its output dtype.
enum class DTypeRule {
  KeepNumeric,  // any dtype but bool, output keeps it
  IntToFloat,   // integer and bool inputs compute in float32
  FloatOnly,    // floating inputs only
};

Tensor unary(const OpDesc& desc, UnaryOp op, const Tensor& x, DTypeRule rule, std::string_view approximate = {}) {
  const char* name = desc.name;
  check_defined(name, x);
  DType out_dtype = x.dtype();
  switch (rule) {
    case DTypeRule::KeepNumeric:
      KILN_CHECK(x.dtype() != DType::Bool, "{}: unsupported dtype bool (supported: int32, int64, float16, bfloat16, "
                                           "float32, float64)", name);
      break;
    case DTypeRule::IntToFloat:
      if (!is_floating(x.dtype())) out_dtype = DType::Float32;
      break;
    case DTypeRule::FloatOnly:
      KILN_CHECK(is_floating(x.dtype()), "{}: unsupported dtype {} (supported: float16, bfloat16, float32, float64)",
                 name, x.dtype());
      break;
  }
  OpScope scope = approximate.empty() ? OpScope(desc, {&x}) : OpScope(desc, {&x}, approximate);
  const Tensor in = x.to(out_dtype);
  Tensor out = new_contiguous(x.sizes(), out_dtype, x.device(), name);
  dispatch::unary_kernels.get(name, x.device())(op, out, in);
  return scope.output(out);
}

}  // namespace

Tensor neg(const Tensor& x) { return unary(op::neg, UnaryOp::Neg, x, DTypeRule::KeepNumeric); }
Tensor exp(const Tensor& x) { return unary(op::exp, UnaryOp::Exp, x, DTypeRule::IntToFloat); }
Tensor log(const Tensor& x) { return unary(op::log, UnaryOp::Log, x, DTypeRule::IntToFloat); }
Tensor sqrt(const Tensor& x) { return unary(op::sqrt, UnaryOp::Sqrt, x, DTypeRule::IntToFloat); }
Tensor rsqrt(const Tensor& x) { return unary(op::rsqrt, UnaryOp::Rsqrt, x, DTypeRule::IntToFloat); }
Tensor abs(const Tensor& x) { return unary(op::abs, UnaryOp::Abs, x, DTypeRule::KeepNumeric); }
Tensor tanh(const Tensor& x) { return unary(op::tanh, UnaryOp::Tanh, x, DTypeRule::IntToFloat); }
Tensor sigmoid(const Tensor& x) { return unary(op::sigmoid, UnaryOp::Sigmoid, x, DTypeRule::IntToFloat); }
Tensor relu(const Tensor& x) { return unary(op::relu, UnaryOp::Relu, x, DTypeRule::KeepNumeric); }
Tensor silu(const Tensor& x) { return unary(op::silu, UnaryOp::Silu, x, DTypeRule::FloatOnly); }

Tensor gelu(const Tensor& x, std::string_view approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  // The record keeps a static string: the caller's may not outlive the call.
  const bool exact = approximate == "none";
  return unary(op::gelu, exact ? UnaryOp::Gelu : UnaryOp::GeluTanh, x, DTypeRule::FloatOnly, exact ? "none" : "tanh");
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x, std::string_view approximate) {
  constexpr const char* name = "gelu_backward";
  check_defined(name, grad, "grad_output");
  check_defined(name, x, "self");
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "gelu_backward: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  KILN_CHECK(is_floating(x.dtype()) && grad.dtype() == x.dtype(),
             "gelu_backward: expected floating grad_output and self of one dtype, got {} and {}", grad.dtype(),
             x.dtype());
  KILN_CHECK(grad.sizes() == x.sizes(), "gelu_backward: grad_output of shape {} and self of shape {} differ",
             shape_str(grad.sizes()), shape_str(x.sizes()));
  common_device(name, {&grad, &x});
  const bool exact = approximate == "none";
  OpScope scope(op::gelu_backward, {&grad, &x}, exact ? "none" : "tanh");
  Tensor out = new_contiguous(x.sizes(), x.dtype(), x.device(), name);
  dispatch::binary_kernels.get(name, x.device())(exact ? BinaryOp::GeluBackward : BinaryOp::GeluTanhBackward, out,
                                                 grad, x, 1);
  return scope.output(out);
}

Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace kiln
