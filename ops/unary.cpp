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

Tensor unary(const char* name, UnaryOp op, const Tensor& x, DTypeRule rule) {
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
  OpScope scope(name, {&x});
  const Tensor in = x.to(out_dtype);
  Tensor out = new_contiguous(x.sizes(), out_dtype, x.device(), name);
  dispatch::unary_kernels.get(name, x.device())(op, out, in);
  return scope.output(out);
}

}  // namespace

Tensor neg(const Tensor& x) { return unary("neg", UnaryOp::Neg, x, DTypeRule::KeepNumeric); }
Tensor exp(const Tensor& x) { return unary("exp", UnaryOp::Exp, x, DTypeRule::IntToFloat); }
Tensor log(const Tensor& x) { return unary("log", UnaryOp::Log, x, DTypeRule::IntToFloat); }
Tensor sqrt(const Tensor& x) { return unary("sqrt", UnaryOp::Sqrt, x, DTypeRule::IntToFloat); }
Tensor rsqrt(const Tensor& x) { return unary("rsqrt", UnaryOp::Rsqrt, x, DTypeRule::IntToFloat); }
Tensor abs(const Tensor& x) { return unary("abs", UnaryOp::Abs, x, DTypeRule::KeepNumeric); }
Tensor tanh(const Tensor& x) { return unary("tanh", UnaryOp::Tanh, x, DTypeRule::IntToFloat); }
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", UnaryOp::Sigmoid, x, DTypeRule::IntToFloat); }
Tensor relu(const Tensor& x) { return unary("relu", UnaryOp::Relu, x, DTypeRule::KeepNumeric); }
Tensor silu(const Tensor& x) { return unary("silu", UnaryOp::Silu, x, DTypeRule::FloatOnly); }

Tensor gelu(const Tensor& x, std::string_view approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return unary("gelu", approximate == "none" ? UnaryOp::Gelu : UnaryOp::GeluTanh, x, DTypeRule::FloatOnly);
}

Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace kiln
