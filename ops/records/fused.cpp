// Op records of the fused ops: fused_linear_gelu (a GEMM whose epilogue adds the bias and
// applies GELU) and its backward op.
//
// fused_linear_gelu has one output, plus a second one, the pre-activation h = input @
// weight^T + bias, exactly when autograd records the call (fused_linear_gelu.h): the backward
// formula reads it (save_output(1)) with the input and the weight, and calls
// fused_linear_gelu_backward, one op that computes only the gradients the inputs need. That
// op has no formula of its own: a second derivative through it stops with a clear error, as
// one through gelu_backward does.
#include "../fused_linear_gelu.h"
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kInputs[] = {"input", "weight", "bias"};
constexpr AttrSpec kAttrs[] = {{"approximate", AttrKind::String}};
constexpr const char* kBackwardInputs[] = {"grad_output", "input", "weight", "preactivation"};
constexpr AttrSpec kBackwardAttrs[] = {{"approximate", AttrKind::String},
                                       {"input_grad", AttrKind::Bool},
                                       {"weight_grad", AttrKind::Bool},
                                       {"bias_grad", AttrKind::Bool}};

// A replayed call gives what the call gave: the pre-activation too when autograd records it.
std::vector<Tensor> replay_fused_linear_gelu(const OpDesc&, std::span<const Tensor> inputs,
                                             std::span<const AttrValue> attrs) {
  const detail::FusedLinearGeluOutputs r =
      detail::fused_linear_gelu_outputs(inputs[0], inputs[1], in(inputs, 2), attr_string(attrs, 0));
  if (r.preactivation.defined()) return {r.out, r.preactivation};
  return one(r.out);
}

std::vector<Tensor> replay_fused_linear_gelu_backward(const OpDesc&, std::span<const Tensor> inputs,
                                                      std::span<const AttrValue> attrs) {
  const FusedLinearGeluGrads g = fused_linear_gelu_backward(inputs[0], inputs[1], inputs[2], inputs[3],
                                                            attr_string(attrs, 0), attr_bool(attrs, 1),
                                                            attr_bool(attrs, 2), attr_bool(attrs, 3));
  return {g.input, g.weight, g.bias};
}

std::vector<Tensor> fused_linear_gelu_grad(const BackwardArgs& a) {
  auto g = grads(3);
  const Tensor& go = grad0(a);
  if (!go.defined()) return g;  // only the pre-activation, never handed out, could have had one
  const Tensor& x = a.inputs[0];
  const Tensor grad = go.dtype() == x.dtype() ? go : go.to(x.dtype());
  const FusedLinearGeluGrads r = fused_linear_gelu_backward(grad, x, a.inputs[1], a.outputs[1], attr_string(a.attrs, 0),
                                                            a.needs_grad[0], a.needs_grad[1], a.needs_grad[2]);
  g[0] = r.input;
  g[1] = r.weight;
  g[2] = r.bias;
  return g;
}

}  // namespace

constinit const OpDesc op::fused_linear_gelu = {.name = "fused_linear_gelu",
                                                .inputs = kInputs,
                                                .attrs = kAttrs,
                                                .replay = &replay_fused_linear_gelu,
                                                .cost = &cost::linear_gelu,
                                                .backward = &fused_linear_gelu_grad,
                                                .saved = save_input(0) | save_input(1) | save_output(1),
                                                .fusion = FusionRole::Gemm};
constinit const OpDesc op::fused_linear_gelu_backward = {.name = "fused_linear_gelu_backward",
                                                         .inputs = kBackwardInputs,
                                                         .attrs = kBackwardAttrs,
                                                         .replay = &replay_fused_linear_gelu_backward,
                                                         .cost = &cost::linear_gelu_backward};

}  // namespace kiln
