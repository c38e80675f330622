// Op records of the one-tensor elementwise ops (neg ... silu, gelu and its backward, clamp,
// dropout, masked_fill): slots, attributes, replay, cost and backward formulas.
#include "record_util.h"

namespace kiln {

namespace {

using namespace records;

constexpr const char* kSelf[] = {"self"};
constexpr AttrSpec kGeluAttrs[] = {{"approximate", AttrKind::String}};

std::vector<Tensor> replay_unary(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  const Tensor& x = inputs[0];
  switch (static_cast<UnaryOp>(op.code)) {
    case UnaryOp::Neg: return one(neg(x));
    case UnaryOp::Exp: return one(exp(x));
    case UnaryOp::Log: return one(log(x));
    case UnaryOp::Sqrt: return one(sqrt(x));
    case UnaryOp::Rsqrt: return one(rsqrt(x));
    case UnaryOp::Abs: return one(abs(x));
    case UnaryOp::Tanh: return one(tanh(x));
    case UnaryOp::Sigmoid: return one(sigmoid(x));
    case UnaryOp::Relu: return one(relu(x));
    case UnaryOp::Gelu:
    case UnaryOp::GeluTanh: return one(gelu(x, attr_string(attrs, 0)));
    case UnaryOp::Silu: return one(silu(x));
  }
  KILN_FAIL("replay: unknown unary op {}", op.name);
}

std::vector<Tensor> unary_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (!a.needs_grad[0]) return g;
  const Tensor& go = grad0(a);
  const Tensor& x = a.inputs[0];
  const Tensor& y = a.outputs[0];
  switch (static_cast<UnaryOp>(a.op.code)) {
    case UnaryOp::Neg: g[0] = neg(go); break;
    case UnaryOp::Exp: g[0] = mul(go, y); break;
    case UnaryOp::Log: g[0] = div(go, x); break;
    case UnaryOp::Sqrt: g[0] = div(go, mul(y, 2)); break;
    case UnaryOp::Rsqrt: g[0] = mul(mul(go, mul(mul(y, y), y)), -0.5); break;
    case UnaryOp::Abs:  // sign(x): 0 at 0, as PyTorch
      g[0] = sub(masked_fill(go, le(x, 0), 0), masked_fill(go, ge(x, 0), 0));
      break;
    case UnaryOp::Tanh: g[0] = mul(go, Scalar(1) - mul(y, y)); break;
    case UnaryOp::Sigmoid: g[0] = mul(go, mul(y, Scalar(1) - y)); break;
    case UnaryOp::Relu: g[0] = masked_fill(go, le(y, 0), 0); break;
    case UnaryOp::Gelu:
    case UnaryOp::GeluTanh: g[0] = gelu_backward(go, x, attr_string(a.attrs, 0)); break;
    case UnaryOp::Silu: {  // s (1 + x (1 - s))
      const Tensor s = sigmoid(x);
      g[0] = mul(go, mul(s, add(mul(x, Scalar(1) - s), 1)));
      break;
    }
  }
  return g;
}

// The inputs and outputs each formula reads.
constexpr uint32_t kSaveX = save_input(0);
constexpr uint32_t kSaveY = save_output(0);

constexpr OpDesc unary(const char* name, UnaryOp code, uint32_t saved, FusionRole fusion = FusionRole::Elementwise) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = {},
                .replay = &replay_unary,
                .cost = &cost::elementwise,
                .backward = &unary_backward,
                .saved = saved,
                .fusion = fusion,
                .code = static_cast<int>(code)};
}

// gelu_backward(grad, x): its own backward (GELU's second derivative) is not implemented;
// create_graph through a GELU stops there with a clear error (no formula).
constexpr const char* kGeluBackwardInputs[] = {"grad_output", "self"};
std::vector<Tensor> replay_gelu_backward(const OpDesc&, std::span<const Tensor> inputs,
                                         std::span<const AttrValue> attrs) {
  return one(gelu_backward(inputs[0], inputs[1], attr_string(attrs, 0)));
}

// ---- clamp ----------------------------------------------------------------------------------
constexpr AttrSpec kClampAttrs[] = {{"min", AttrKind::OptionalScalar}, {"max", AttrKind::OptionalScalar}};
constexpr AttrSpec kClampMinAttrs[] = {{"min", AttrKind::Scalar}};
constexpr AttrSpec kClampMaxAttrs[] = {{"max", AttrKind::Scalar}};

std::vector<Tensor> replay_clamp(const OpDesc& op, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  if (&op == &op::clamp_min) return one(clamp_min(inputs[0], attr_scalar(attrs, 0)));
  if (&op == &op::clamp_max) return one(clamp_max(inputs[0], attr_scalar(attrs, 0)));
  if (&op == &op::clamp_) {
    Tensor self = inputs[0];
    return one(clamp_(self, attr_optional_scalar(attrs, 0), attr_optional_scalar(attrs, 1)));
  }
  return one(clamp(inputs[0], attr_optional_scalar(attrs, 0), attr_optional_scalar(attrs, 1)));
}

// The gradient passes where min <= x <= max (PyTorch's clamp_backward).
std::vector<Tensor> clamp_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (!a.needs_grad[0]) return g;
  const Tensor& x = a.inputs[0];
  std::optional<Scalar> lo, hi;
  if (&a.op == &op::clamp_min) lo = attr_scalar(a.attrs, 0);
  else if (&a.op == &op::clamp_max) hi = attr_scalar(a.attrs, 0);
  else lo = attr_optional_scalar(a.attrs, 0), hi = attr_optional_scalar(a.attrs, 1);
  Tensor out = grad0(a);
  if (lo) out = masked_fill(out, lt(x, *lo), 0);
  if (hi) out = masked_fill(out, gt(x, *hi), 0);
  g[0] = out;
  return g;
}

constexpr OpDesc clamp_desc(const char* name, std::span<const AttrSpec> attrs, uint32_t flags, BackwardFn bw) {
  return OpDesc{.name = name,
                .inputs = kSelf,
                .attrs = attrs,
                .flags = flags,
                .replay = &replay_clamp,
                .cost = &cost::elementwise,
                .backward = bw,
                .saved = kSaveX,
                .fusion = FusionRole::Elementwise};
}

// ---- dropout --------------------------------------------------------------------------------
constexpr AttrSpec kDropoutAttrs[] = {
    {"p", AttrKind::Double}, {"train", AttrKind::Bool}, {"seed", AttrKind::Int}, {"offset", AttrKind::Int}};

PhiloxState dropout_state(std::span<const AttrValue> attrs) {
  return PhiloxState{static_cast<uint64_t>(attr_int(attrs, 2)), static_cast<uint64_t>(attr_int(attrs, 3))};
}

// Replay regenerates the recorded mask (the recorded Philox state), so it equals the call.
std::vector<Tensor> replay_dropout(const OpDesc&, std::span<const Tensor> inputs, std::span<const AttrValue> attrs) {
  return one(detail::dropout_with_state(inputs[0], attr_double(attrs, 0), attr_bool(attrs, 1), dropout_state(attrs)));
}

// The same mask applied to the gradient: dropout(g) with the recorded state is g * keep / (1 - p).
std::vector<Tensor> dropout_backward(const BackwardArgs& a) {
  auto g = grads(1);
  if (a.needs_grad[0])
    g[0] = detail::dropout_with_state(grad0(a), attr_double(a.attrs, 0), attr_bool(a.attrs, 1), dropout_state(a.attrs));
  return g;
}

// ---- masked_fill ----------------------------------------------------------------------------
constexpr const char* kMaskedFillInputs[] = {"self", "mask"};
constexpr AttrSpec kMaskedFillAttrs[] = {{"value", AttrKind::Scalar}};

std::vector<Tensor> replay_masked_fill(const OpDesc& op, std::span<const Tensor> inputs,
                                       std::span<const AttrValue> attrs) {
  if (&op == &op::masked_fill_) {
    Tensor self = inputs[0];
    return one(masked_fill_(self, inputs[1], attr_scalar(attrs, 0)));
  }
  return one(masked_fill(inputs[0], inputs[1], attr_scalar(attrs, 0)));
}

std::vector<Tensor> masked_fill_backward(const BackwardArgs& a) {
  auto g = grads(2);
  if (a.needs_grad[0]) g[0] = masked_fill(grad0(a), a.inputs[1], 0);
  return g;
}

constexpr OpDesc masked_fill_desc(const char* name, uint32_t flags) {
  return OpDesc{.name = name,
                .inputs = kMaskedFillInputs,
                .attrs = kMaskedFillAttrs,
                .flags = flags,
                .replay = &replay_masked_fill,
                .backward = &masked_fill_backward,
                .saved = save_input(1),
                .fusion = FusionRole::Elementwise};
}

}  // namespace

constinit const OpDesc op::neg = unary("neg", UnaryOp::Neg, 0);
constinit const OpDesc op::exp = unary("exp", UnaryOp::Exp, kSaveY);
constinit const OpDesc op::log = unary("log", UnaryOp::Log, kSaveX);
constinit const OpDesc op::sqrt = unary("sqrt", UnaryOp::Sqrt, kSaveY);
constinit const OpDesc op::rsqrt = unary("rsqrt", UnaryOp::Rsqrt, kSaveY);
constinit const OpDesc op::abs = unary("abs", UnaryOp::Abs, kSaveX);
constinit const OpDesc op::tanh = unary("tanh", UnaryOp::Tanh, kSaveY, FusionRole::Activation);
constinit const OpDesc op::sigmoid = unary("sigmoid", UnaryOp::Sigmoid, kSaveY, FusionRole::Activation);
constinit const OpDesc op::relu = unary("relu", UnaryOp::Relu, kSaveY, FusionRole::Activation);
constinit const OpDesc op::silu = unary("silu", UnaryOp::Silu, kSaveX, FusionRole::Activation);
constinit const OpDesc op::gelu = {.name = "gelu",
                                   .inputs = kSelf,
                                   .attrs = kGeluAttrs,
                                   .replay = &replay_unary,
                                   .cost = &cost::elementwise,
                                   .backward = &unary_backward,
                                   .saved = kSaveX,
                                   .fusion = FusionRole::Activation,
                                   .code = static_cast<int>(UnaryOp::Gelu)};
constinit const OpDesc op::gelu_backward = {.name = "gelu_backward",
                                            .inputs = kGeluBackwardInputs,
                                            .attrs = kGeluAttrs,
                                            .replay = &replay_gelu_backward,
                                            .cost = &cost::elementwise,
                                            .fusion = FusionRole::Elementwise};
constinit const OpDesc op::clamp = clamp_desc("clamp", kClampAttrs, 0, &clamp_backward);
// In place, the input clamp's backward reads is gone: no formula, so autograd refuses it
// on a tensor that requires grad (use clamp()).
constinit const OpDesc op::clamp_ = clamp_desc("clamp_", kClampAttrs, kOpInPlace, nullptr);
constinit const OpDesc op::clamp_min = clamp_desc("clamp_min", kClampMinAttrs, 0, &clamp_backward);
constinit const OpDesc op::clamp_max = clamp_desc("clamp_max", kClampMaxAttrs, 0, &clamp_backward);
constinit const OpDesc op::dropout = {.name = "dropout",
                                      .inputs = kSelf,
                                      .attrs = kDropoutAttrs,
                                      .flags = kOpRandom,
                                      .replay = &replay_dropout,
                                      .cost = &cost::elementwise,
                                      .backward = &dropout_backward,
                                      .fusion = FusionRole::Elementwise};
constinit const OpDesc op::masked_fill = masked_fill_desc("masked_fill", 0);
constinit const OpDesc op::masked_fill_ = masked_fill_desc("masked_fill_", kOpInPlace);

}  // namespace kiln
