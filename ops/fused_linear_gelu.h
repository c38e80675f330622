// fused_linear_gelu: gelu(linear(input, weight, bias), approximate) as one op, so the GEMM's
// result gets its bias and GELU before it is stored, and is stored once. graph::
// fuse_linear_gelu rewrites linear -> gelu pairs into it; users may call it directly.
//
// Autograd: the backward needs the pre-activation h = input @ weight^T + bias. The op writes
// h only when autograd records the call (grad mode on and an input requires grad); it is then
// the op record's second output, saved for the backward and never returned to the user. With
// no gradient to compute, h is never materialised. The backward is one op of its own,
// fused_linear_gelu_backward (dH = grad * gelu'(h), then the two gradient GEMMs and the bias
// gradient), so a profile shows one row for it.
#pragma once

#include <string_view>

#include "../tensor/tensor.h"

namespace kiln {

/// gelu(linear(input, weight, bias), approximate): input [..., in], weight [out, in], bias [out]
/// (may be undefined) -> [..., out]; approximate is "none" (exact erf GELU) or "tanh". Floating
/// dtypes only, all operands of one dtype and device.
Tensor fused_linear_gelu(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                         std::string_view approximate = "none");

/// The gradients fused_linear_gelu_backward computes; undefined where not asked for.
struct FusedLinearGeluGrads {
  Tensor input;   ///< [..., in], the input's shape
  Tensor weight;  ///< [out, in]
  Tensor bias;    ///< [out]
};

/// fused_linear_gelu's backward: with dH = grad_output * gelu'(preactivation) (grad_output and
/// preactivation [..., out]), input [..., in] and weight [out, in]: grad input = dH @ weight,
/// grad weight = dH^T @ input (leading dims flattened), grad bias = dH summed over rows; only
/// the gradients asked for are computed.
FusedLinearGeluGrads fused_linear_gelu_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                                const Tensor& preactivation, std::string_view approximate,
                                                bool input_grad = true, bool weight_grad = true,
                                                bool bias_grad = true);

namespace detail {
/// What one fused_linear_gelu call produced: its result and, when autograd recorded the call,
/// the pre-activation it saved (undefined otherwise).
struct FusedLinearGeluOutputs {
  Tensor out;
  Tensor preactivation;
};
/// fused_linear_gelu, also handing back the pre-activation it wrote (replay's adapter: a
/// replayed call gives the outputs the call recorded).
FusedLinearGeluOutputs fused_linear_gelu_outputs(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                 std::string_view approximate);
}  // namespace detail

}  // namespace kiln
