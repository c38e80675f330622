// fused_linear_gelu and its backward op: validation (linear's checks and messages under the
// fused op's name, plus GELU's approximate), the op scopes, and the kernel calls. Operands
// reach the kernels as 2-D matrices: leading dims are folded into rows by a view where the
// strides allow it (a contiguous or row-sliced input), by a dense copy otherwise, so no nested
// op (reshape, contiguous) shows up under the fused op in a profile or a captured graph.
// The pre-activation is allocated and written only when autograd records the call (see
// fused_linear_gelu.h); the CPU kernel is fused_linear_gelu_cpu.cpp, the CUDA one
// fused_linear_gelu_cuda.cu.
#include "fused_linear_gelu.h"

#include <algorithm>

#include "../tensor/make.h"
#include "kernels.h"
#include "op_scope.h"
#include "validate.h"

namespace kiln {

namespace dispatch {
KernelTable<FusedLinearGeluKernel> fused_linear_gelu_kernels;
KernelTable<FusedLinearGeluBackwardKernel> fused_linear_gelu_backward_kernels;
}  // namespace dispatch

namespace {

constexpr const char* kForward = "fused_linear_gelu";
constexpr const char* kBackward = "fused_linear_gelu_backward";

// The record keeps a static string: the caller's may not outlive the call.
std::string_view checked_mode(const char* op, std::string_view approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "{}: approximate must be \"none\" or \"tanh\", got \"{}\"",
             op, approximate);
  return approximate == "none" ? "none" : "tanh";
}

UnaryOp gelu_op(std::string_view mode) { return mode == "none" ? UnaryOp::Gelu : UnaryOp::GeluTanh; }

// A dense copy of `t` (same shape), through the copy kernel.
Tensor dense(const Tensor& t, const char* op) {
  Tensor d = new_contiguous(t.sizes(), t.dtype(), t.device(), op);
  dispatch::copy_kernels.get(op, t.device())(d, t);
  return d;
}

// `t` [..., cols] as a [rows, cols] matrix: a view when its leading dims fold into one stride,
// else a dense copy.
Tensor as_matrix(const Tensor& t, const char* op) {
  const int64_t nd = t.dim();
  const int64_t cols = t.sizes()[static_cast<size_t>(nd - 1)];
  const int64_t col_stride = t.strides()[static_cast<size_t>(nd - 1)];
  if (nd == 2) return t;
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) rows *= t.sizes()[static_cast<size_t>(d)];
  // One row or none: any row stride describes it; take the row length, as a dense one has.
  int64_t row_stride = std::max<int64_t>(cols, 1);
  if (rows > 1) {
    int64_t inner = 0;  // entries of the leading dims folded so far, innermost first
    for (int64_t d = nd - 2; d >= 0; --d) {
      const int64_t size = t.sizes()[static_cast<size_t>(d)], stride = t.strides()[static_cast<size_t>(d)];
      if (size == 1) continue;
      if (inner == 0) {
        row_stride = stride;  // the innermost leading dim with more than one entry
        inner = size;
      } else if (stride == row_stride * inner) {
        inner *= size;
      } else {
        return as_matrix(dense(t, op), op);
      }
    }
  }
  return new_view(t, {rows, cols}, {row_stride, col_stride}, t.storage_offset(), op);
}

// A contiguous [rows, cols] view of a contiguous tensor [..., cols].
Tensor matrix_of(const Tensor& t, int64_t rows, int64_t cols, const char* op) {
  if (!t.defined()) return t;
  return new_view(t, {rows, cols}, {std::max<int64_t>(cols, 1), 1}, 0, op);
}

// The shape of linear(input, weight): input's with the last dim replaced by out_features.
Shape output_shape(const Tensor& input, int64_t out_features) {
  Shape s = input.sizes();
  s.back() = out_features;
  return s;
}

int64_t leading_rows(const Shape& s) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < s.size(); ++d) rows *= s[d];
  return rows;
}

}  // namespace

namespace detail {

FusedLinearGeluOutputs fused_linear_gelu_outputs(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                 std::string_view approximate) {
  const std::string_view mode = checked_mode(kForward, approximate);
  check_defined(kForward, input, "input");
  check_defined(kForward, weight, "weight");
  common_device(kForward, {&input, &weight});
  KILN_CHECK(input.dtype() == weight.dtype(),
             "fused_linear_gelu: expected input and weight to have the same dtype, but got {} and {}", input.dtype(),
             weight.dtype());
  KILN_CHECK(is_floating(input.dtype()),
             "fused_linear_gelu: unsupported dtype {} (supported: float16, bfloat16, float32, float64)", input.dtype());
  KILN_CHECK(weight.dim() == 2,
             "fused_linear_gelu: weight must be 2-D [out_features, in_features], got shape {}",
             shape_str(weight.sizes()));
  KILN_CHECK(input.dim() >= 1, "fused_linear_gelu: input must have at least 1 dimension, got a 0-dim tensor");
  const int64_t in_features = weight.sizes()[1], out_features = weight.sizes()[0];
  KILN_CHECK(input.sizes().back() == in_features,
             "fused_linear_gelu: input's last dimension ({}) does not match in_features ({}): input shape {}, weight "
             "shape {}",
             input.sizes().back(), in_features, shape_str(input.sizes()), shape_str(weight.sizes()));
  if (bias.defined()) {
    common_device(kForward, {&input, &weight, &bias});
    KILN_CHECK(bias.dim() == 1 && bias.sizes()[0] == out_features,
               "fused_linear_gelu: bias must have shape [{}] (out_features), got {}", out_features,
               shape_str(bias.sizes()));
    KILN_CHECK(bias.dtype() == input.dtype(), "fused_linear_gelu: expected bias to have dtype {}, but got {}",
               input.dtype(), bias.dtype());
  }
  const Shape out_shape = output_shape(input, out_features);
  KILN_CHECK(checked_numel(out_shape).has_value(),
             "fused_linear_gelu: input (shape {}) and weight (shape {}) need an output of shape {}, which has too many "
             "elements (the element count overflows int64)",
             shape_str(input.sizes()), shape_str(weight.sizes()), shape_str(out_shape));

  OpScope scope(op::fused_linear_gelu, {&input, &weight, &bias}, mode);
  const Device device = input.device();
  const int64_t rows = leading_rows(out_shape);
  Tensor out = new_contiguous(out_shape, input.dtype(), device, kForward);
  // The pre-activation only for a backward that will read it.
  Tensor pre = scope.records_grad() ? new_contiguous(out_shape, input.dtype(), device, kForward) : Tensor();
  const Tensor b = bias.defined() && !bias.is_contiguous() ? dense(bias, kForward) : bias;
  dispatch::fused_linear_gelu_kernels.get(kForward, device)(matrix_of(out, rows, out_features, kForward),
                                                            matrix_of(pre, rows, out_features, kForward),
                                                            as_matrix(input, kForward), weight, b, gelu_op(mode));
  if (pre.defined()) {
    const Tensor outs[] = {out, pre};
    scope.outputs(outs);
  } else {
    out = scope.output(out);
  }
  return {out, pre};
}

}  // namespace detail

Tensor fused_linear_gelu(const Tensor& input, const Tensor& weight, const Tensor& bias, std::string_view approximate) {
  return detail::fused_linear_gelu_outputs(input, weight, bias, approximate).out;
}

FusedLinearGeluGrads fused_linear_gelu_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                                const Tensor& preactivation, std::string_view approximate,
                                                bool input_grad, bool weight_grad, bool bias_grad) {
  const std::string_view mode = checked_mode(kBackward, approximate);
  check_defined(kBackward, grad_output, "grad_output");
  check_defined(kBackward, input, "input");
  check_defined(kBackward, weight, "weight");
  check_defined(kBackward, preactivation, "preactivation");
  const Device device = common_device(kBackward, {&grad_output, &input, &weight, &preactivation});
  const DType dtype = input.dtype();
  KILN_CHECK(is_floating(dtype) && grad_output.dtype() == dtype && weight.dtype() == dtype &&
                 preactivation.dtype() == dtype,
             "fused_linear_gelu_backward: expected grad_output, input, weight and preactivation of one floating dtype, "
             "got {}, {}, {} and {}",
             grad_output.dtype(), dtype, weight.dtype(), preactivation.dtype());
  KILN_CHECK(weight.dim() == 2 && input.dim() >= 1 && input.sizes().back() == weight.sizes()[1],
             "fused_linear_gelu_backward: expected input [..., in_features] and weight [out_features, in_features], "
             "got shapes {} and {}",
             shape_str(input.sizes()), shape_str(weight.sizes()));
  const int64_t in_features = weight.sizes()[1], out_features = weight.sizes()[0];
  const Shape out_shape = output_shape(input, out_features);
  KILN_CHECK(grad_output.sizes() == out_shape && preactivation.sizes() == out_shape,
             "fused_linear_gelu_backward: grad_output and preactivation must have shape {} (input {} through weight "
             "{}), got {} and {}",
             shape_str(out_shape), shape_str(input.sizes()), shape_str(weight.sizes()), shape_str(grad_output.sizes()),
             shape_str(preactivation.sizes()));

  OpScope scope(op::fused_linear_gelu_backward, {&grad_output, &input, &weight, &preactivation}, mode, input_grad,
                weight_grad, bias_grad);
  const int64_t rows = leading_rows(out_shape);
  FusedLinearGeluGrads g;
  if (input_grad) g.input = new_contiguous(input.sizes(), dtype, device, kBackward);
  if (weight_grad) g.weight = new_contiguous({out_features, in_features}, dtype, device, kBackward);
  if (bias_grad) g.bias = new_contiguous({out_features}, dtype, device, kBackward);
  if (input_grad || weight_grad || bias_grad)
    dispatch::fused_linear_gelu_backward_kernels.get(kBackward, device)(
        matrix_of(g.input, rows, in_features, kBackward), g.weight, g.bias, as_matrix(grad_output, kBackward),
        as_matrix(preactivation, kBackward), as_matrix(input, kBackward), weight, gelu_op(mode));
  const Tensor outs[] = {g.input, g.weight, g.bias};
  scope.outputs(outs);
  return g;
}

}  // namespace kiln
